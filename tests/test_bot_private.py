"""Private chats end to end: what the user sees and what the model is sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.bot_harness import RunningBot, bot_settings, running_bot
from tests.fakes.bot_api import FakeBotApi
from tests.fakes.model_server import FakeModelServer

USER = 501


@pytest.fixture
async def bot(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> AsyncIterator[RunningBot]:
    settings = bot_settings(tmp_path / "bot.sqlite3", bot_api, model_server)
    async with running_bot(settings, bot_api, model_server) as running:
        yield running


async def test_three_round_private_consultation(bot: RunningBot) -> None:
    """Two clarifying rounds with a button, then the final answer marked complete."""
    bot.model.enqueue("**Which** exercises?")
    bot.model.enqueue("How long have you trained?")
    bot.model.enqueue("## Plan\n- 3×12 hammer curls")
    await bot.send(USER, "Help me pick weights")
    first = await bot.replies(USER, 1)
    assert first[0].startswith("Which exercises?")
    assert first[0].endswith("Round 1 of 3")
    await bot.send(USER, "Hammer curls")
    await bot.replies(USER, 2)
    await bot.send(USER, "Two months")
    texts = await bot.replies(USER, 3)
    assert "Plan" in texts[2] and "3×12 hammer curls" in texts[2]
    assert "Final answer" in texts[2] and "Consultation complete" in texts[2]
    final_request = bot.model.requests[-1]["messages"]
    assert "round 3 of 3" in final_request[0]["content"]
    assert '"Help me pick weights"' in final_request[0]["content"]
    assert [m["content"] for m in final_request[1:]] == [
        "Help me pick weights",
        "**Which** exercises?",
        "Hammer curls",
        "How long have you trained?",
        "Two months",
    ]
    sends = [c for c in bot.api.calls_of("sendMessage") if str(c.params["chat_id"]) == str(USER)]
    assert "reply_markup" in sends[0].params and "reply_markup" not in sends[2].params
