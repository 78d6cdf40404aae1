"""What goes wrong around a private chat, end to end: model outages, restarts, quick
messages, many chats at once, blocked chats and expiry."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from core.domain.consultation import Role
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import (
    RunningBot,
    ask_private,
    conversation,
    delivered,
    sent,
    started_bot,
    system_prompt,
)

USER = 801
OTHER = 802
TTL = 3600  # the default SESSION_TTL_SECONDS


def idle_for(db_path: Path, seconds: float) -> None:
    """Make every consultation in the database look idle for `seconds` longer, as if that
    much time had passed since its last message (a connection of its own, like a clock)."""
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE consultations SET last_activity_at = last_activity_at - ?", (seconds,))


async def stored_texts(bot: RunningBot, chat_id: int) -> list[tuple[Role, str]]:
    consultation = await bot.runtime.store.load_active(f"tg:{chat_id}")
    assert consultation is not None
    return [(m.role, m.text) for m in consultation.messages]


async def fail_model_turn(bot: RunningBot, text: str) -> str:
    """Send `text` while the model answers 500 to the call and its one SDK retry."""
    bot.model.enqueue("upstream exploded", status=500)
    bot.model.enqueue("upstream exploded", status=500)
    [error] = await ask_private(bot, USER, text)
    return error


async def test_model_outage_explains_and_retry_answers_round_one(bot: RunningBot) -> None:
    """After 500s beyond the retries the user gets a clear error; /retry answers round 1."""
    error = await fail_model_turn(bot, "Plan my week")
    assert error.startswith("⚠️ The model is not answering right now")
    assert "the service is unavailable" in error and "/retry" in error
    assert "Traceback" not in error and "500" not in error and "exploded" not in error
    assert len(bot.model.requests) == 2  # the call and the SDK's one retry
    [status] = await ask_private(bot, USER, "/status")
    assert "0 of 3 rounds answered" in status and "still waiting" in status
    [reply] = await ask_private(bot, USER, "/retry")
    assert reply == "Reply to: Plan my week\n\nRound 1 of 3"
    assert [conversation(r) for r in bot.model.requests] == [["Plan my week"]] * 3
    assert await stored_texts(bot, USER) == [
        (Role.USER, "Plan my week"),
        (Role.ASSISTANT, "Reply to: Plan my week"),
    ]


async def test_resending_after_an_outage_is_not_stored_twice(bot: RunningBot) -> None:
    """Sending the same text again after a failure answers round 1 with it once."""
    await fail_model_turn(bot, "Plan my week")
    [reply] = await ask_private(bot, USER, "Plan my week")
    assert reply.endswith("Round 1 of 3")
    assert conversation(bot.model.requests[-1]) == ["Plan my week"]
    assert "round 1 of 3" in system_prompt(bot.model.requests[-1])
    assert await stored_texts(bot, USER) == [
        (Role.USER, "Plan my week"),
        (Role.ASSISTANT, "Reply to: Plan my week"),
    ]


async def test_new_message_after_an_outage_joins_the_open_round(bot: RunningBot) -> None:
    """A different message after a failure is answered together with the first, as round 1."""
    await fail_model_turn(bot, "Plan my week")
    [reply] = await ask_private(bot, USER, "Actually, my month")
    assert reply.endswith("Round 1 of 3")
    assert conversation(bot.model.requests[-1]) == ["Plan my week\n\nActually, my month"]
    assert [text for _, text in await stored_texts(bot, USER)] == [
        "Plan my week",
        "Actually, my month",
        "Reply to: Plan my week\n\nActually, my month",
    ]


async def test_stream_broken_midway_is_explained_and_retried(bot: RunningBot) -> None:
    """A stream that breaks after some text gives the error reply; /retry answers round 1."""
    bot.model.enqueue("A partial answer that breaks off", error_after=2, chunk_size=4)
    [error] = await ask_private(bot, USER, "Question")
    assert error.startswith("⚠️ The model is not answering right now")
    [reply] = await ask_private(bot, USER, "/retry")
    assert reply == "Reply to: Question\n\nRound 1 of 3"


async def test_restart_continues_the_consultation(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A bot started again on the same database continues at round 2 with the history.
    (A real process killed mid-answer is tested in test_entrypoint and test_guarantees_bot.)"""
    db = tmp_path / "bot.sqlite3"
    async with started_bot(db, bot_api, model_server) as first:
        await ask_private(first, USER, "Help me learn Spanish")
    async with started_bot(db, bot_api, model_server) as second:
        [reply] = await ask_private(second, USER, "Thirty minutes a day")
        assert reply.endswith("Round 2 of 3")
        assert conversation(model_server.requests[-1]) == [
            "Help me learn Spanish",
            "Reply to: Help me learn Spanish",
            "Thirty minutes a day",
        ]
        assert "round 2 of 3" in system_prompt(model_server.requests[-1])
    assert len(model_server.requests) == 2  # the first message was not processed again


async def test_quick_messages_are_answered_in_order(bot: RunningBot) -> None:
    """Two messages sent while the model is still answering the first are both answered,
    in order, the second as round 2 with the first round in its history."""
    release = asyncio.Event()
    bot.model.hold = release
    await bot.send(USER, "first")
    await bot.send(USER, "second")
    await bot.model.wait_requests(1)
    release.set()
    await bot.api.wait_for(lambda c: delivered(c, USER), 10, count=2)
    texts = [c.params["text"] for c in sent(bot, USER)]
    assert texts == ["Reply to: first\n\nRound 1 of 3", "Reply to: second\n\nRound 2 of 3"]
    assert conversation(bot.model.requests[1]) == ["first", "Reply to: first", "second"]


async def test_two_hundred_chats_run_concurrently(bot: RunningBot) -> None:
    """200 chats writing at once are answered concurrently: the model holds every reply
    until all 200 questions have reached it, which cannot happen if any chat waits for
    another's answer. Each chat gets exactly its own answer."""
    all_asked = asyncio.Event()
    bot.model.hold = all_asked
    chats = range(10_000, 10_200)
    for chat in chats:
        await bot.send(chat, f"question {chat}")
    await bot.model.wait_requests(len(chats), timeout=60)
    all_asked.set()
    await bot.api.wait_for(
        lambda c: c.method == "sendMessage" and c.result is not None, 60, count=len(chats)
    )
    for chat in chats:
        assert [c.params["text"] for c in sent(bot, chat)] == [
            f"Reply to: question {chat}\n\nRound 1 of 3"
        ]


async def test_blocked_chat_is_not_retried_and_others_keep_working(
    bot: RunningBot, caplog: pytest.LogCaptureFixture
) -> None:
    """A 403 from a chat that blocked the bot ends that reply at once, logged once."""
    caplog.set_level(logging.INFO)
    bot.api.fail_next(
        "sendMessage", status=403, description="Forbidden: bot was blocked by the user"
    )
    await bot.send(USER, "Hello?")
    await bot.api.wait_for(lambda c: c.method == "sendMessage" and c.status == 403)
    [reply] = await ask_private(bot, OTHER, "Anyone there?")
    assert reply.startswith("Reply to: Anyone there?")
    to_blocked = [c for c in bot.api.calls_of("sendMessage") if c.params["chat_id"] == USER]
    assert len(to_blocked) == 1
    notes = [r for r in caplog.records if "does not accept messages" in r.getMessage()]
    assert len(notes) == 1 and str(USER) in notes[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_expired_consultation_starts_fresh_and_says_why(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A message after the TTL starts round 1 with fresh history, after an explanation."""
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        await ask_private(bot, USER, "Old topic")
        idle_for(tmp_path / "bot.sqlite3", TTL + 1)
        notice, reply = await ask_private(bot, USER, "New topic", parts=2)
        assert notice.startswith("Your previous consultation expired")
        assert reply.endswith("Round 1 of 3")
        assert conversation(model_server.requests[-1]) == ["New topic"]


async def test_user_is_told_when_the_cleanup_expired_the_consultation(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A consultation expired by the periodic cleanup is still explained to the user."""
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        await ask_private(bot, USER, "Old topic")
        idle_for(tmp_path / "bot.sqlite3", TTL + 1)
        await bot.runtime.engine.lifecycle.cleanup(retention_seconds=86_400)  # what the loop runs
        [first, *_] = await ask_private(bot, USER, "New topic")
        assert first.startswith("Your previous consultation expired")


async def test_reply_that_could_not_be_delivered_comes_before_the_next_one(
    bot: RunningBot,
) -> None:
    """If Telegram fails every attempt to deliver an answer, it is kept and sent first
    when the user writes again: the round it consumed is never silently lost."""
    bot.api.fail_next("sendMessage", status=502, description="Bad Gateway", times=4)
    await bot.send(USER, "First question")
    await bot.api.wait_for(
        lambda c: c.method == "sendMessage" and c.status == 502, timeout=10, count=4
    )
    assert sent(bot, USER) == []
    texts = await ask_private(bot, USER, "Second question", parts=2)
    assert texts[0] == "Reply to: First question\n\nRound 1 of 3"
    assert texts[1].endswith("Round 2 of 3")
