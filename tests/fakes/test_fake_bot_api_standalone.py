"""`python -m fakes.bot_api --port N`, as a person trying the bot by hand starts it (and the
benchmark's fakes serve the same class): a separate process that answers the bot's calls,
in the JSON bodies the bot sends and in forms, and stops on SIGTERM. The child is always
reaped, so a failing test leaves nothing listening."""

from __future__ import annotations

import asyncio
import sys

import aiohttp

from fakes.bot_api import TOKEN
from tests.fakes.test_fake_model_standalone import free_port


async def test_the_standalone_fake_answers_json_and_form_calls() -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "fakes.bot_api",
        "--port",
        str(port),
        "--username",
        "trial_bot",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        banner = await asyncio.wait_for(process.stdout.readline(), 30)
        assert f"127.0.0.1:{port}" in banner.decode()
        base = f"http://127.0.0.1:{port}/bot{TOKEN}"
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{base}/getMe", json={}) as response:
                assert response.status == 200
                me = await response.json()
            async with http.post(
                f"{base}/sendMessage", data={"chat_id": "5", "text": "hi"}
            ) as sent:
                assert sent.status == 200
                message = await sent.json()
        assert me["ok"] and me["result"]["username"] == "trial_bot"
        assert message["ok"] and message["result"]["text"] == "hi"
        process.terminate()
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
        assert b"Traceback" not in stderr
    finally:
        if process.returncode is None:
            process.kill()
            await process.communicate()
