"""The runtime opens the tool servers' toolbox only with MCP_SERVERS (and TOOLS_ENABLED),
offers it to whoever builds on the runtime, and stops its servers when it closes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.runtime import open_runtime
from app.settings import Settings, load_settings
from core.domain.tools import ToolCall, ToolServerStatus
from fakes.model_server import FakeModelServer, ScriptedCall
from tests.api_harness import api_settings, running_api
from tests.mcp_harness import ROOT, fake_stdio, time_server


def runtime_settings(tmp_path: Path, **overrides: Any) -> Settings:
    return load_settings(
        openai_api_key="test-key",
        openai_base_url="http://127.0.0.1:9/v1",  # never called here
        llm_model="test-model",
        db_path=tmp_path / "runtime.sqlite3",
        llm_max_retries=0,
        _env_file=None,
        **overrides,
    )


async def test_without_tool_servers_the_runtime_has_no_toolbox(tmp_path: Path) -> None:
    async with open_runtime(runtime_settings(tmp_path), background=False) as runtime:
        assert runtime.toolbox() is None
        assert runtime.tool_statuses() == ()


async def test_tools_enabled_false_keeps_the_configured_servers_off(tmp_path: Path) -> None:
    servers = json.dumps({"fake": fake_stdio(tmp_path / "calls.log")})
    settings = runtime_settings(tmp_path, mcp_servers=servers, tools_enabled=False)
    async with open_runtime(settings, background=False) as runtime:
        assert runtime.toolbox() is None
    assert not (tmp_path / "calls.log").exists()


@pytest.mark.timeout(40)
async def test_the_runtime_starts_the_tool_servers_and_stops_them_when_it_closes(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    servers = json.dumps({"fake": fake_stdio(log), "gone": {"command": str(tmp_path / "nope")}})
    settings = runtime_settings(
        tmp_path, mcp_servers=servers, mcp_tools_allow="fake.echo", tool_timeout_seconds=5
    )
    async with open_runtime(settings, background=False) as runtime:
        toolbox = runtime.toolbox()
        assert toolbox is not None
        assert [spec.name for spec in toolbox.specs()] == ["fake__echo"]
        fake, gone = runtime.tool_statuses()
        assert fake == ToolServerStatus(name="fake", state="ready", tools=1)
        assert (gone.name, gone.state, gone.tools) == ("gone", "failed", 0)
        use = await toolbox.call(ToolCall(id="c1", name="fake__echo", arguments='{"text": "hi"}'))
        assert use.result == "hi"
    pid = int(log.read_text().split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize("tools", [True, False])
def test_a_process_leaves_out_cryptography_only_without_tool_servers(tools: bool) -> None:
    """The MCP SDK imports `cryptography`; python-telegram-bot would import it for nothing
    (`app.lean_imports`). httpx's command line is left out either way."""
    program = (
        "import sys\n"
        "from app.lean_imports import leave_out_unused\n"
        f"leave_out_unused(tools={tools})\n"
        "import telegram.ext\n"
        "if sys.argv[1] == 'True':\n"
        "    import tools.toolbox\n"
        "loaded = {n for n, m in sys.modules.items() if m is not None}\n"
        "print(sorted(loaded & {'cryptography', 'click', 'httpx._main', 'tools.toolbox'}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, str(tools)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    # With tools the SDK loads click itself (its server side imports uvicorn).
    expected = "['click', 'cryptography', 'tools.toolbox']" if tools else "[]"
    assert done.stdout.strip() == expected


@pytest.mark.timeout(60)
async def test_a_consultation_looks_the_time_up_through_mcp_server_time(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """The runtime's engine offers the time server's tools, runs the call the model asks
    for through the real server, and sends the model its result."""
    settings = api_settings(
        tmp_path / "api.sqlite3",
        model_server.base_url,
        mcp_servers=json.dumps({"time": time_server()}),
        mcp_tools_allow="time.get_current_time",
    )
    model_server.enqueue_calls(
        ScriptedCall("time__get_current_time", '{"timezone": "UTC"}', id="call_time")
    )
    async with running_api(settings) as api:
        response = await api.client.post("/api/chat", json={"message": "What time is it?"})
        assert response.status == 200, await response.text()
        reply = await response.json()
    first, second = model_server.requests[-2:]
    assert [tool["function"]["name"] for tool in first["tools"]] == ["time__get_current_time"]
    result = json.loads(second["messages"][-1]["content"])
    assert second["messages"][-1]["tool_call_id"] == "call_time"
    assert result["timezone"] == "UTC" and result["datetime"].endswith("+00:00")
    assert '"timezone": "UTC"' in str(reply)
