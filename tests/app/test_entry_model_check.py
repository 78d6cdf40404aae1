"""The entry points check the model endpoint once they are up: real `python -m api` and
`python -m bot` processes against the fake model server (and the fake Bot API)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fakes.bot_api import TOKEN, FakeBotApi
from fakes.model_server import FakeModelServer


def free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


async def first_warning(module: str, tmp_path: Path, **values: str) -> str:
    """Start `python -m <module>`, return its first WARNING line, then stop it with SIGTERM
    (it must exit cleanly: the warning never stops a start)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "OPENAI_API_KEY": "test-key",
        "LLM_MAX_RETRIES": "0",
        "DB_PATH": str(tmp_path / "x.sqlite3"),
        **values,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, env=env, cwd=tmp_path,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        while True:
            line = (await asyncio.wait_for(process.stderr.readline(), 30)).decode()
            assert line, "the process ended without a warning"
            if " WARNING " in line:
                break
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.communicate(), 30)
        assert process.returncode == 0
        return line
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize("module", ["api", "bot"])
async def test_a_base_url_without_v1_is_one_warning_once_up(
    tmp_path: Path, model_server: FakeModelServer, bot_api: FakeBotApi, module: str
) -> None:
    """OPENAI_BASE_URL without /v1: the API and the bot start, and say so in one WARNING."""
    model_server.models = ["test-model"]
    line = await first_warning(
        module,
        tmp_path,
        OPENAI_BASE_URL=model_server.base_url.removesuffix("/v1"),
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_API_BASE_URL=bot_api.base_url,
        API_ENABLED="true" if module == "api" else "false",
        API_PORT=free_port(),
    )

    assert "OPENAI_BASE_URL" in line and "/v1" in line
