"""Tool servers come and go: one that dies in the middle of a call is reported gone and
started again; one that cannot start is logged once and the bot runs without it; closing
the toolbox leaves no server process running."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

import pytest

from core.domain.tools import ToolCall, ToolFailure
from tests.mcp_harness import fake_http, fake_stdio, port_of, running_toolbox
from tests.waiting import until
from tools.toolbox import McpToolbox


def call(name: str, arguments: str = "{}") -> ToolCall:
    return ToolCall(id="call_1", name=name, arguments=arguments)


def pids(log: Path) -> list[int]:
    """The server processes that took calls, in order (FAKE_MCP_LOG: "<pid> <tool>")."""
    lines = log.read_text().splitlines() if log.exists() else []
    return list(dict.fromkeys(int(line.split()[0]) for line in lines))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def state(toolbox: McpToolbox, name: str) -> str:
    return next(s.state for s in toolbox.statuses() if s.name == name)


@pytest.mark.timeout(30)
async def test_a_stdio_server_that_dies_mid_call_is_gone_then_started_again(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    async with running_toolbox({"fake": fake_stdio(log)}) as toolbox:
        assert (await toolbox.call(call("fake__echo", '{"text": "before"}'))).ok
        use = await toolbox.call(call("fake__die"))
        assert (use.failure, use.error) == (ToolFailure.UNAVAILABLE, "server gone")
        assert (use.server, use.tool) == ("fake", "die")
        await until(lambda: state(toolbox, "fake") == "ready", "the fake started again")
        again = await toolbox.call(call("fake__echo", '{"text": "after"}'))
        assert again.ok and again.result == "after"
        first, second = pids(log)
        assert not alive(first) and alive(second)
        assert len(toolbox.specs()) == 8


@pytest.mark.timeout(30)
async def test_a_server_that_is_down_offers_no_tools_and_its_calls_say_gone(
    tmp_path: Path,
) -> None:
    async with running_toolbox({"fake": fake_stdio()}, first_retry=5.0) as toolbox:
        await toolbox.call(call("fake__die"))
        await until(lambda: state(toolbox, "fake") == "restarting", "the death was noticed")
        [status] = toolbox.statuses()
        assert status.tools == 0 and status.error == "the server closed the connection"
        assert toolbox.specs() == []
        use = await toolbox.call(call("fake__echo", '{"text": "anyone?"}'))
        assert (use.failure, use.error) == (ToolFailure.UNAVAILABLE, "server gone")


@pytest.mark.timeout(40)
async def test_an_http_server_that_dies_mid_call_is_gone_until_it_answers_again() -> None:
    async with fake_http() as (url, process), running_toolbox({"docs": {"url": url}}) as toolbox:
        use = await toolbox.call(call("docs__die"))
        assert (use.failure, use.error) == (ToolFailure.UNAVAILABLE, "server gone")
        await process.wait()
        await until(lambda: state(toolbox, "docs") != "ready", "the death was noticed")
        assert toolbox.specs() == []
        async with fake_http(port_of(url)):
            await until(lambda: state(toolbox, "docs") == "ready", "it reconnected")
            again = await toolbox.call(call("docs__echo", '{"text": "back"}'))
            assert again.ok and again.result == "back"


@pytest.mark.timeout(30)
async def test_an_http_server_gone_while_nobody_calls_is_found_by_its_ping() -> None:
    async with (
        fake_http() as (url, process),
        running_toolbox({"docs": {"url": url}}, ping_every=0.2) as toolbox,
    ):
        assert state(toolbox, "docs") == "ready"
        process.kill()
        await process.wait()
        await until(lambda: state(toolbox, "docs") != "ready", "the ping found it gone")
        assert toolbox.specs() == []


@pytest.mark.timeout(30)
async def test_a_server_that_cannot_start_is_logged_once_and_the_others_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tools")
    servers = {"gone": {"command": str(tmp_path / "no-such-server")}, "fake": fake_stdio()}
    async with running_toolbox(servers, first_retry=0.05) as toolbox:
        gone, fake = toolbox.statuses()
        assert (gone.name, gone.state, gone.tools) == ("gone", "failed", 0)
        assert gone.error is not None and "no-such-server" in gone.error
        assert (fake.state, fake.tools) == ("ready", 8)
        assert {spec.server for spec in toolbox.specs()} == {"fake"}
        retries = lambda: [r for r in caplog.records if "still down" in r.getMessage()]  # noqa: E731
        await until(lambda: len(retries()) >= 3, "three retries")
    warnings = [
        r for r in caplog.records if r.levelno >= logging.WARNING and "gone" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert warnings[0].getMessage().startswith("tool server gone (")
    assert "cannot start: FileNotFoundError" in warnings[0].getMessage()


@pytest.mark.timeout(30)
async def test_a_server_that_never_answers_initialize_fails_within_the_start_bound() -> None:
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(600)"]}
    async with running_toolbox({"silent": silent}, start_seconds=1.0) as toolbox:
        [status] = toolbox.statuses()
        assert status.state == "failed"
        assert status.error == "no answer to initialize and tools/list within 1 s"


@pytest.mark.timeout(30)
async def test_closing_leaves_no_server_process_even_with_a_call_hanging(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    servers = {"one": fake_stdio(log), "two": fake_stdio(log)}
    async with running_toolbox(servers) as toolbox:
        hanging = asyncio.create_task(toolbox.call(call("one__hang")))
        assert (await toolbox.call(call("two__echo", '{"text": "x"}'))).ok
        await until(lambda: len(pids(log)) == 2, "both servers took a call")
        assert all(alive(pid) for pid in pids(log))
    assert not any(alive(pid) for pid in pids(log))
    use = await hanging
    assert use.failure is ToolFailure.UNAVAILABLE


async def test_allow_patterns_leave_the_other_tools_unoffered_and_uncallable() -> None:
    async with running_toolbox({"fake": fake_stdio()}, allow="fake.echo,fake.b*") as toolbox:
        assert [spec.name for spec in toolbox.specs()] == ["fake__echo", "fake__big"]
        assert toolbox.statuses()[0].tools == 2
        refused = await toolbox.call(call("fake__fail"))
        assert refused.failure is ToolFailure.UNKNOWN_TOOL
