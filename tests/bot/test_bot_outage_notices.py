"""A database outage costs a chat at most one "temporarily unavailable" message a minute,
whatever fails (the turn's store, or the shared limit checked before it) and however many
inputs arrive; a button press gets the notice in its own popup, never in the chat; once
the database is back the next message is answered normally."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from bot.transport.outage import OutageNotices
from bot.updates.cluster_state import SharedState
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from fakes.tcp_relay import TcpRelay
from storage.postgres.cluster.pool import open_shared_pool
from storage.postgres.cluster.rate_limits import PostgresRateLimits
from tests.bot_harness import (
    ALICE,
    BOB,
    CAROL,
    GROUP,
    RunningBot,
    bot_settings,
    conversation,
    group_answer,
    group_texts,
    post_in_group,
    running_bot,
    sent,
    started_bot,
)
from tests.postgres import postgres_url  # noqa: F401  (fixture)
from tests.storage.test_store_faults import fill_disk, free_disk

UNAVAILABLE = "temporarily unavailable"
MEMBERS = ((ALICE, "Alice"), (BOB, "Bob"), (CAROL, "Carol"))
USER = 905


def big_question(n: int) -> str:
    """A question needing pages a full disk lacks (numbered lines: the fake model echoes
    it, and a reply repeating one line is cut as a loop)."""
    return "@consult_bot " + " ".join(f"Which laptop {n}-{k:03d} should I buy?" for k in range(125))


async def post_nine(bot: RunningBot) -> None:
    for n in range(9):
        user, name = MEMBERS[n % 3]
        await post_in_group(bot, big_question(n), user=user, name=name)


async def handled(caplog: pytest.LogCaptureFixture, fragment: str, count: int) -> None:
    """Wait (a bounded while) until `count` updates logged the store failure `fragment`."""
    for _ in range(200):
        if sum(fragment in record.getMessage() for record in caplog.records) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{count} updates not handled")


async def answered_after_the_outage(bot: RunningBot) -> None:
    """One more question, handled after the nine (one chat's updates run in order):
    answered normally."""
    await post_in_group(bot, "@consult_bot Which phone should I buy?", user=ALICE)
    await group_answer(bot, 1)


async def test_nine_messages_in_a_group_while_the_disk_is_full_cost_one_notice(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        await fill_disk(bot.runtime.store)
        await post_nine(bot)
        await handled(caplog, "store unavailable in chat", 9)
        await free_disk(bot.runtime.store)

        await answered_after_the_outage(bot)

        notices = [text for text in group_texts(bot) if UNAVAILABLE in text]
        assert len(notices) == 1
        assert "send the same message again" in notices[0]  # no inbox: nothing was kept
        asked = [conversation(request)[-1] for request in model_server.requests]
        assert len(asked) == 1 and "Which phone" in asked[0]  # the nine stored nothing


SharedLimitsBot = tuple[RunningBot, TcpRelay, asyncpg.Pool]


@pytest_asyncio.fixture
async def shared_limits_bot(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    postgres_url: str,  # noqa: F811
) -> AsyncIterator[SharedLimitsBot]:
    """A bot whose message and press limits are shared on PostgreSQL, reached through a
    relay the test can cut."""
    relay = await TcpRelay.start(postgres_url)
    pool = await open_shared_pool(relay.relayed_url)
    settings = bot_settings(
        tmp_path / "bot.sqlite3", bot_api, model_server, user_rate_limit_per_minute=100
    )
    shared = SharedState(
        rate_limits=PostgresRateLimits(pool, 100),
        press_limits=PostgresRateLimits(pool, 100, table="bot_press_limits"),
    )
    try:
        async with running_bot(settings, bot_api, model_server, shared=shared) as bot:
            yield bot, relay, pool
    finally:
        pool.terminate()
        await relay.stop()


async def database_back(relay: TcpRelay, pool: asyncpg.Pool) -> None:
    """End the outage; wait (a bounded while) until the pool's connections work again."""
    relay.restore()
    for _ in range(50):
        try:
            await pool.fetchval("SELECT 1")
            return
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            await asyncio.sleep(0.1)
    raise AssertionError("the database did not come back")


async def test_nine_messages_in_a_group_while_the_shared_limit_is_down_cost_one_notice(
    shared_limits_bot: SharedLimitsBot, caplog: pytest.LogCaptureFixture
) -> None:
    bot, relay, pool = shared_limits_bot
    relay.lose_connections()
    await post_nine(bot)
    await handled(caplog, "store unavailable while handling an update", 9)
    await database_back(relay, pool)

    await answered_after_the_outage(bot)

    notices = [text for text in group_texts(bot) if UNAVAILABLE in text]
    assert len(notices) == 1


async def test_a_button_press_while_the_shared_limit_is_down_gets_a_popup_only(
    shared_limits_bot: SharedLimitsBot,
) -> None:
    bot, relay, pool = shared_limits_bot
    relay.lose_connections()
    for message_id in (41, 42, 43):
        bot.api.push_update(bot.api.callback_query(USER, USER, "rounds:5", message_id))
    await bot.api.wait_for(
        lambda c: c.method == "answerCallbackQuery" and c.result is not None, count=3
    )
    popups = [c.params.get("text") for c in bot.api.calls_of("answerCallbackQuery")]

    assert len(popups) == 3
    assert all(UNAVAILABLE in str(text) for text in popups)
    assert sent(bot, USER) == []

    await database_back(relay, pool)
    bot.api.push_update(bot.api.callback_query(USER, USER, "rounds:5", 44))
    await bot.api.wait_for(
        lambda c: (
            c.method == "sendMessage" and c.result is not None and c.params.get("chat_id") == USER
        )
    )
    assert [c.params["text"] for c in sent(bot, USER)] == ["Rounds per consultation: 5."]


def test_a_chat_is_told_again_only_after_a_minute() -> None:
    now = [1000.0]
    notices = OutageNotices(clock=lambda: now[0])

    assert [notices.may_tell(GROUP), notices.may_tell(GROUP), notices.may_tell(USER)] == [
        True,
        False,
        True,
    ]
    now[0] += 59
    assert not notices.may_tell(GROUP)
    now[0] += 2
    assert notices.may_tell(GROUP)
