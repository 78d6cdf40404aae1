"""The minimal relay (`bench/minimal_bot.py`) as the benchmark starts it: a separate
process that relays each message to the model in one non-streaming call carrying the
chat's history, and sends the reply with one `sendMessage`; each chat keeps its own
history. The process is always stopped, so a failing test leaves nothing polling."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer

ROOT = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def minimal_relay(
    bot_api: FakeBotApi, model: FakeModelServer, scratch: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`python -m bench.minimal_bot` on the fakes, from a scratch directory (no `.env`)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TELEGRAM_BOT_TOKEN": "123456:TEST-TOKEN",
        "TELEGRAM_API_BASE_URL": bot_api.base_url,
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": model.base_url,
        "LLM_MODEL": "fake-model",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.minimal_bot",
        cwd=scratch,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.communicate(), 15)
            except TimeoutError:
                process.kill()
                await process.communicate()


async def say(bot_api: FakeBotApi, chat_id: int, text: str, replies: int) -> str:
    """Push `text` in `chat_id`; the text of the `replies`-th sendMessage (so far, overall)."""
    bot_api.push_update(bot_api.text_message(chat_id, text, user_id=chat_id))
    sent = await bot_api.wait_for("sendMessage", timeout=30, count=replies)
    assert sent.params["chat_id"] == chat_id
    return str(sent.params["text"])


async def test_each_message_is_answered_from_its_chats_history(
    bot_api: FakeBotApi, model_server: FakeModelServer, tmp_path: Path
) -> None:
    """A second message in a chat goes to the model after the first exchange, another
    chat's message alone; every call asks for the whole reply, not a stream."""
    async with minimal_relay(bot_api, model_server, tmp_path):
        assert await say(bot_api, 41, "our shop needs a payment provider", 1) == (
            "Reply to: our shop needs a payment provider"
        )
        assert await say(bot_api, 42, "how do I back up a laptop?", 2) == (
            "Reply to: how do I back up a laptop?"
        )
        assert await say(bot_api, 41, "we sell in the EU", 3) == "Reply to: we sell in the EU"

    first, other, second = model_server.requests
    assert first["messages"] == [{"role": "user", "content": "our shop needs a payment provider"}]
    assert other["messages"] == [{"role": "user", "content": "how do I back up a laptop?"}]
    assert second["messages"] == [
        {"role": "user", "content": "our shop needs a payment provider"},
        {"role": "assistant", "content": "Reply to: our shop needs a payment provider"},
        {"role": "user", "content": "we sell in the EU"},
    ]
    assert not any(body.get("stream") for body in model_server.requests)
    assert {call.method for call in bot_api.calls} >= {"getMe", "getUpdates", "sendMessage"}
    assert len(bot_api.calls_of("sendMessage")) == 3
