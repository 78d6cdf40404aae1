"""The process's intake gate at the Telegram edge: a few updates at a time between their
arrival and their model call, and never one that holds the others back."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.primitives.intake_gate import IntakeGate
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import bot_settings, running_bot, wait_sent


async def test_chats_waiting_for_the_model_leave_the_gate_to_the_next(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """One slot, and a model that answers nobody yet: every chat still reaches it, since a
    turn at its model call is out of its intake."""
    settings = bot_settings(tmp_path / "bot.sqlite3", bot_api, model_server)
    gate = IntakeGate(1, hold_limit=60)
    model_server.hold = asyncio.Event()
    async with running_bot(settings, bot_api, model_server, turn_intake=gate) as bot:
        chats = [801, 802, 803, 804]
        for chat in chats:
            await bot.send(chat, f"Question from chat {chat}")
        await model_server.wait_requests(len(chats), timeout=10)
        asked = sorted(request["messages"][-1]["content"] for request in model_server.requests)
        assert asked == [f"Question from chat {chat}" for chat in chats]
        assert gate.inside == 0
        model_server.hold.set()
        for chat in chats:
            [reply] = await wait_sent(bot, chat, 1)
            assert reply.endswith("Round 1 of 3")


async def test_an_update_stuck_before_its_model_call_holds_no_other_chat(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A file whose getFile hangs keeps its slot only for the hold limit: another chat is
    answered meanwhile, and the file's turn goes on once Telegram answers."""
    settings = bot_settings(tmp_path / "bot.sqlite3", bot_api, model_server)
    gate = IntakeGate(1, hold_limit=0.2)
    async with running_bot(settings, bot_api, model_server, turn_intake=gate) as bot:
        bot_api.latency["getFile"] = 4.0
        media = bot_api.document(b"line one\n", "notes.txt", "text/plain")
        await bot.send(901, None, media=media, caption="Summarise this")
        await bot_api.wait_for(lambda call: call.method == "getFile", 5)
        await bot.send(902, "A question while the file loads")
        [reply] = await wait_sent(bot, 902, 1, timeout=3)
        assert reply.endswith("Round 1 of 3")
        assert not [c for c in bot_api.calls_of("sendMessage") if c.params["chat_id"] == 901]
        [file_reply] = await wait_sent(bot, 901, 1, timeout=15)
        assert file_reply.endswith("Round 1 of 3")
        assert gate.inside == 0
