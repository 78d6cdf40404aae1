"""`python -m tests.fakes.model_server --port N`, as the image's smoke check and the
benchmark start it: a separate process that answers chat completions by itself."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys

import aiohttp


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_the_standalone_server_answers_with_its_default_reply() -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.fakes.model_server",
        "--port",
        str(port),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
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
    finally:
        process.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(process.communicate(), 30)
    assert "Traceback" not in err.decode(), err.decode()
