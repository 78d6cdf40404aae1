"""Bot building blocks: strings, access, addressing, flood control (a few against the fake
Bot API)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from telegram import Update
from telegram.error import RetryAfter
from telegram.ext import ExtBot

from app.runtime import open_runtime
from bot.app import build_application
from bot.commands.turns import TurnRunner
from bot.handlers import Handlers
from bot.transport.chat import chat_key, strip_mention
from bot.transport.config import BotConfig
from bot.transport.flood import ChatFloodControl
from bot.transport.say import Say
from bot.updates.access import RateLimiter, is_allowed
from bot.updates.cluster_state import SharedState
from core.primitives.expiring import ExpiringDict
from fakes.bot_api import TOKEN, FakeBotApi
from fakes.model_server import FakeModelServer
from storage.postgres.cluster.pool import open_shared_pool
from storage.postgres.cluster.rate_limits import PostgresRateLimits
from tests.bot_harness import bot_settings
from tests.postgres import postgres_url  # noqa: F401  (fixture)


def test_allow_lists() -> None:
    """Empty lists allow all; otherwise the user or the chat must be listed."""
    nobody: frozenset[int] = frozenset()
    assert is_allowed(user_id=1, chat_id=5, allowed_users=nobody, allowed_chats=nobody)
    assert is_allowed(user_id=1, chat_id=5, allowed_users=frozenset({1}), allowed_chats=nobody)
    one, listed = frozenset({1}), frozenset({-9})
    assert is_allowed(user_id=2, chat_id=-9, allowed_users=one, allowed_chats=listed)
    assert not is_allowed(user_id=2, chat_id=5, allowed_users=frozenset({1}), allowed_chats=nobody)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@ConsultBot what about taxes?", "what about taxes?"),
        ("hey @consultbot, help", "hey help"),
        ("@CONSULTBOT: help", "help"),
        ("mail me at a@consultbotx.com", "mail me at a@consultbotx.com"),
        ("what do you think, @ConsultBot?", "what do you think?"),
        ("so @ConsultBot , what now", "so, what now"),
    ],
)
def test_mention_is_stripped_case_insensitively(text: str, expected: str) -> None:
    """The bot's @username is removed from the text the model sees; other text stays."""
    assert strip_mention(text, "ConsultBot") == expected


def test_chat_keys_separate_forum_topics() -> None:
    """A group and each of its topics are separate conversations."""
    assert chat_key(-100) == "tg:-100"
    assert chat_key(-100, 7) == "tg:-100:7"
    assert re.fullmatch(r"tg:\d+", chat_key(42))


async def test_retry_after_pauses_only_the_limited_chat() -> None:
    """A RetryAfter in one chat delays that chat's retry, not another chat's requests."""
    control = ChatFloodControl(max_retries=2)
    calls: list[tuple[int, float]] = []
    loop = asyncio.get_running_loop()
    paused = asyncio.Event()  # chat 1 got its RetryAfter; it runs no further until its pause ends

    async def callback(chat_id: int) -> dict:
        calls.append((chat_id, loop.time()))
        if chat_id == 1 and not paused.is_set():
            paused.set()
            raise RetryAfter(1)
        return {"ok": True}

    start = loop.time()
    limited = asyncio.create_task(
        control.process_request(callback, (1,), {}, "sendMessage", {"chat_id": 1}, None)
    )
    await paused.wait()
    other = await control.process_request(callback, (2,), {}, "sendMessage", {"chat_id": 2}, None)
    assert other == {"ok": True}
    assert await limited == {"ok": True}
    # chat 2 went through while chat 1 was paused; chat 1 retried after its delay
    assert [chat for chat, _ in calls] == [1, 2, 1]
    assert calls[-1][1] - start >= 1.0


async def test_retry_after_beyond_max_retries_is_raised() -> None:
    """When flood control persists past the allowed retries the caller gets RetryAfter."""
    control = ChatFloodControl(max_retries=0)

    async def callback() -> dict:
        raise RetryAfter(0)

    with pytest.raises(RetryAfter):
        await control.process_request(callback, (), {}, "sendMessage", {"chat_id": 1}, None)


async def test_the_rate_limiter_forgets_users_a_window_after_their_last_message() -> None:
    """Thousands of users who wrote once are dropped as time passes, without a full
    scan: memory follows the users of the last minute, not all users ever seen."""
    now = [0.0]
    limiter = RateLimiter(5, clock=lambda: now[0])
    for user in range(5000):
        assert await limiter.check(user) == 0.0
        await limiter.should_warn(user)
    assert limiter.tracked() == 5000
    now[0] = 61.0
    assert await limiter.check(99_999) == 0.0
    assert limiter.tracked() == 1
    assert await limiter.should_warn(0)  # a new window: warned again


async def test_flood_state_of_chats_that_never_return_is_dropped() -> None:
    """Pauses end and idle group limiters go, even for chats that never write again."""
    now = [0.0]
    control = ChatFloodControl(max_retries=0, clock=lambda: now[0])

    async def limited() -> dict:
        raise RetryAfter(30)

    async def fine() -> dict:
        return {"ok": True}

    for chat in range(1, 501):
        with pytest.raises(RetryAfter):
            await control.process_request(limited, (), {}, "sendMessage", {"chat_id": chat}, None)
        await control.process_request(fine, (), {}, "sendMessage", {"chat_id": -chat}, None)
    assert control.tracked_chats() == 1000
    now[0] = 200.0
    await control.process_request(fine, (), {}, "sendMessage", {"chat_id": -9999}, None)
    assert control.tracked_chats() == 1


def test_turn_runner_forgets_blocked_chats_and_undelivered_replies_after_a_day() -> None:
    """A chat that blocked the bot and never returns is not remembered forever."""
    now = [0.0]
    runner = TurnRunner(ttl_minutes=60, clock=lambda: now[0])
    for chat in range(1000):
        runner._note_blocked(chat, RuntimeError("blocked"))
    assert len(runner._blocked) == 1000
    now[0] = 24 * 3600.0
    runner._note_blocked(5000, RuntimeError("blocked"))
    assert len(runner._blocked) == 1


def test_expiring_dict_keeps_entries_until_their_deadline() -> None:
    """Visible until `ttl` after the last set; a refresh moves the deadline; `max_size`
    drops the oldest."""
    now = [0.0]
    entries: ExpiringDict[str, int] = ExpiringDict(10, max_size=3, clock=lambda: now[0])
    entries["a"] = 1
    now[0] = 5.0
    entries["a"] = 3  # refreshed: lives until 15
    now[0] = 6.0
    entries["b"] = 2
    now[0] = 12.0
    assert entries.get("a") == 3 and "b" in entries
    now[0] = 15.0
    assert "a" not in entries and entries.pop("b") == 2 and entries.pop("b") is None
    for key in "wxyz":
        entries[key] = 0 if key == "w" else 1
    assert "w" not in entries and len(entries) == 3
    entries.set("long", 1, ttl=100)
    now[0] = 50.0
    assert entries.get("long") == 1 and entries.get("z") is None


async def test_handlers_count_messages_in_the_rate_limit_they_are_given(
    bot_api: FakeBotApi,
) -> None:
    """Two workers' handlers given one limit: a user's second message within the minute,
    reaching the other worker, is refused there with one warning."""
    shared = RateLimiter(1)
    async with ExtBot(TOKEN, base_url=bot_api.base_url) as ext:
        context = SimpleNamespace(bot=ext)
        workers = [
            Handlers(
                None,  # type: ignore[arg-type]  # accept() never reaches the service
                BotConfig(token=TOKEN, user_rate_limit_per_minute=50),
                turns=TurnRunner(ttl_minutes=60),
                say=Say(ext),
                rate_limits=shared,
            )
            for _ in range(2)
        ]
        first = Update.de_json(bot_api.text_message(31, "one", user_id=31), ext)
        second = Update.de_json(bot_api.text_message(31, "two", user_id=31), ext)
        assert await workers[0].accept(first, context) is not None  # type: ignore[arg-type]
        assert await workers[1].accept(second, context) is None  # type: ignore[arg-type]
    [warning] = bot_api.sent_texts(31)
    assert warning.startswith("You're sending messages too fast")


async def test_two_applications_given_one_shared_state_share_the_rate_limit(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The state a deployment's workers share reaches the handlers through
    `build_application`: the second message, handled by the other application, is
    refused by the limit both were given."""
    settings = bot_settings(tmp_path / "s.sqlite3", bot_api, model_server)
    shared = SharedState(rate_limits=RateLimiter(1))
    async with open_runtime(settings, background=False) as runtime:
        workers = [
            build_application(settings.bot_config(), runtime.engine, shared=shared)
            for _ in range(2)
        ]
        for worker, text in zip(workers, ["one", "two"], strict=True):
            await worker.initialize()
            update = bot_api.text_message(41, text, user_id=41)
            await worker.process_update(Update.de_json(update, worker.bot))
            await worker.shutdown()
    replies = bot_api.sent_texts(41)
    assert replies[0].startswith("Reply to: one")
    assert replies[-1].startswith("You're sending messages too fast")
    assert len(model_server.requests) == 1


async def test_two_applications_given_one_shared_state_share_the_press_limit(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Button presses are limited through the shared state too: a user's second press,
    handled by the other application, gets the "too many presses" popup."""
    settings = bot_settings(tmp_path / "s.sqlite3", bot_api, model_server)
    shared = SharedState(press_limits=RateLimiter(1))
    async with open_runtime(settings, background=False) as runtime:
        workers = [
            build_application(settings.bot_config(), runtime.engine, shared=shared)
            for _ in range(2)
        ]
        for worker in workers:
            await worker.initialize()
            update = bot_api.callback_query(42, 42, "rounds:2", 1)
            await worker.process_update(Update.de_json(update, worker.bot))
            await worker.shutdown()
    popups = [c.params.get("text") for c in bot_api.calls_of("answerCallbackQuery")]
    assert popups[0] is None
    assert popups[1].startswith("Too many presses")
    assert bot_api.sent_texts(42) == ["Rounds per consultation: 2."]


async def test_workers_on_postgresql_share_the_command_limit_and_the_one_refusal(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    postgres_url: str,  # noqa: F811
) -> None:
    """Two applications given one PostgreSQL limit: a user's second /status, reaching the
    other worker, is told to wait; a plain member's /rounds 2 sent to both workers (under
    an ample limit) is refused in the group once."""
    settings = bot_settings(tmp_path / "s.sqlite3", bot_api, model_server)
    pool = await open_shared_pool(postgres_url)
    try:
        tight = SharedState(rate_limits=PostgresRateLimits(pool, 1))
        ample = SharedState(rate_limits=PostgresRateLimits(pool, 50))
        async with open_runtime(settings, background=False) as runtime:
            for shared, chat, user, text, chat_type in (
                (tight, 42, 42, "/status", "private"),
                (ample, -1009, 44, "/rounds 2", "supergroup"),
            ):
                for _ in range(2):
                    worker = build_application(settings.bot_config(), runtime.engine, shared=shared)
                    await worker.initialize()
                    update = bot_api.text_message(chat, text, user_id=user, chat_type=chat_type)
                    await worker.process_update(Update.de_json(update, worker.bot))
                    await worker.shutdown()
    finally:
        await pool.close()
    private = bot_api.sent_texts(42)
    assert private[0].startswith("No active consultation")
    assert private[1].startswith("You're sending messages too fast")
    assert len(private) == 2
    [refusal] = bot_api.sent_texts(-1009)
    assert refusal.startswith("Only group admins")
