"""Guarantees of the Telegram bot that only show when something is slow or fails at the
wrong moment, end to end (real PTB Application, fake Bot API, real openai SDK against the
fake model server, real SQLite): one chat's updates are handled strictly one after
another *including delivery*, and every message is stored before the model is called, in
every round, so neither an outage nor a killed process loses it."""

from __future__ import annotations

import asyncio
import signal

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.app.test_entrypoint import USER as PROCESS_USER
from tests.app.test_entrypoint import StartBot, answered, start_bot  # noqa: F401 - a fixture
from tests.bot_harness import (
    FirstCallOnly,
    RunningBot,
    ask_private,
    conversation,
    delivered,
    sent,
)

USER = 901


def in_delivery_order(bot: RunningBot, chat_id: int) -> list[str]:
    """Texts delivered to the chat, in the order Telegram accepted them (message ids grow)."""
    calls = sorted(sent(bot, chat_id), key=lambda c: c.result["message_id"])
    return [c.params["text"] for c in calls]


async def test_quick_messages_stay_in_order_when_the_first_reply_is_flood_limited(
    bot: RunningBot,
) -> None:
    """Two messages sent at once, the first reply hit by a 429: both are answered in order."""
    bot.api.fail_next(
        "sendMessage", status=429, description="Too Many Requests: retry after 1", retry_after=1
    )
    await bot.send(USER, "first")
    await bot.send(USER, "second")
    await bot.api.wait_for(lambda c: delivered(c, USER), 15, count=2)
    assert in_delivery_order(bot, USER) == [
        "Reply to: first\n\nRound 1 of 3",
        "Reply to: second\n\nRound 2 of 3",
    ]


async def test_a_slow_delivery_holds_back_the_chats_next_message(bot: RunningBot) -> None:
    """The next message of a chat is handled only once the previous reply was delivered.

    The consultation service orders the model calls of one chat, but delivery happens
    after it let go: only the per-chat update order keeps a reply whose delivery is
    slow (Telegram taking 2 s to accept it) ahead of the next message's reply.
    """
    bot.api.latency = FirstCallOnly(sendMessage=2.0)
    await bot.send(USER, "first")
    await bot.send(USER, "second")
    await bot.api.wait_for(lambda c: delivered(c, USER), 15, count=2)
    assert in_delivery_order(bot, USER) == [
        "Reply to: first\n\nRound 1 of 3",
        "Reply to: second\n\nRound 2 of 3",
    ]


async def test_model_outage_in_round_two_keeps_the_message(bot: RunningBot) -> None:
    """A failed round 2 leaves its message waiting: /status says so, /retry answers it."""
    await ask_private(bot, USER, "Plan my week")
    bot.model.enqueue("upstream exploded", status=500)
    bot.model.enqueue("upstream exploded", status=500)  # the SDK's one retry
    [error] = await ask_private(bot, USER, "Mostly evenings")
    assert error.startswith("⚠️ The model is not answering right now")
    [status] = await ask_private(bot, USER, "/status")
    assert "1 of 3 rounds answered" in status and "still waiting" in status
    [reply] = await ask_private(bot, USER, "/retry")
    assert reply == "Reply to: Mostly evenings\n\nRound 2 of 3"
    assert conversation(bot.model.requests[-1]) == [
        "Plan my week",
        "Reply to: Plan my week",
        "Mostly evenings",
    ]


async def test_a_process_killed_in_round_two_loses_no_message(
    start_bot: StartBot,  # noqa: F811 - the fixture imported above
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """kill -9 while the model answers round 2; after a restart /retry answers that message."""
    first = await start_bot()
    bot_api.push_update(
        bot_api.text_message(PROCESS_USER, "Help me pick weights", user_id=PROCESS_USER)
    )
    await answered(bot_api, "Round 1 of 3")
    never = asyncio.Event()
    model_server.enqueue("too late", hold=never)
    bot_api.push_update(bot_api.text_message(PROCESS_USER, "Hammer curls", user_id=PROCESS_USER))
    await first.asked(model_server, 2)
    code = await first.stop(signal.SIGKILL)
    assert code == -signal.SIGKILL

    second = await start_bot()
    bot_api.push_update(bot_api.text_message(PROCESS_USER, "/retry", user_id=PROCESS_USER))
    text = await answered(bot_api, "Reply to: Hammer curls")
    assert text.endswith("Round 2 of 3")
    assert conversation(model_server.requests[-1]) == [
        "Help me pick weights",
        "Reply to: Help me pick weights",
        "Hammer curls",
    ]
    assert not any("too late" in t for t in bot_api.sent_texts(PROCESS_USER))
    code = await second.stop()
    assert code == 0
