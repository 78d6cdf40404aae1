"""`python -m fakes.model_server --port N`, as the image's smoke check and the
benchmark start it: a separate process that answers chat completions by itself, and
stops cleanly (exit 0, no traceback) on SIGTERM, also when started as a background job
(SIGINT ignored). The child is always reaped, so a failing test leaves nothing listening."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import AsyncIterator

import aiohttp
import pytest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def ignore_sigint() -> None:
    """What a shell does to a background job's processes (`nohup make test &`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.asynccontextmanager
async def standalone(port: int, *, background: bool) -> AsyncIterator[asyncio.subprocess.Process]:
    """The server as a child process; killed and reaped at the end whatever happened."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "fakes.model_server",
        "--port",
        str(port),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=ignore_sigint if background else None,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.communicate()


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
async def test_the_standalone_server_answers_and_stops_on_sigterm(background: bool) -> None:
    port = free_port()
    async with standalone(port, background=background) as process:
        assert process.stdout is not None
        banner = await asyncio.wait_for(process.stdout.readline(), 30)
        assert f"127.0.0.1:{port}/v1" in banner.decode()
        body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body) as response,
        ):
            assert response.status == 200, await response.text()
            answer = await response.json()
        assert answer["choices"][0]["message"]["content"] == "Reply to: hello"
        process.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    assert "Traceback" not in err.decode(), err.decode()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing listens any more
