"""The cluster's Telegram-level rows on PostgreSQL are each bot's (`bot`, its scope): the same
update id in two bots' inboxes is two updates, a bot's dead letter is listed, replayed and
dropped as that bot's only, and undelivered replies and flood waits of the same chat id in
two bots are apart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio

from storage.postgres.cluster import dead_letters
from storage.postgres.cluster.flood_waits import PostgresFloodWaits
from storage.postgres.cluster.inbox import PostgresInbox
from storage.postgres.cluster.pool import open_shared_pool
from storage.postgres.cluster.undelivered import PostgresUndelivered
from storage.postgres.store import PostgresStore
from tests.postgres import postgres_url  # noqa: F401  (fixture)

Inboxes = tuple[PostgresInbox, PostgresInbox]


@pytest_asyncio.fixture
async def inboxes(postgres_url: str) -> AsyncIterator[Inboxes]:  # noqa: F811
    """The deployment's bot's inbox, and bot 2's view of the same pool."""
    store = await PostgresStore.open(postgres_url)  # migrates
    first = await PostgresInbox.open(postgres_url)
    second = first.for_bot(2)
    try:
        yield first, second
    finally:
        await second.close()
        await first.close()
        await store.close()


@pytest_asyncio.fixture
async def pool(postgres_url: str) -> AsyncIterator[asyncpg.Pool]:  # noqa: F811
    store = await PostgresStore.open(postgres_url)  # migrates
    shared = await open_shared_pool(postgres_url)
    try:
        yield shared
    finally:
        await shared.close()
        await store.close()


async def test_update_five_of_each_bot_is_queued_and_handled_in_its_own_bot(
    inboxes: Inboxes,
) -> None:
    """Both bots' update 5 are accepted once each; each bot sees and finishes only its own."""
    first, second = inboxes
    assert await first.put(5, "tg:1", "first's") is True
    assert await second.put(5, "tg2:1", "second's") is True
    assert await first.put(5, "tg:1", "again") is False
    assert await second.remember(5) is False
    assert await first.pending_chats() == ["tg:1"]
    assert await second.pending_chats() == ["tg2:1"]
    assert await first.next("tg2:1") is None  # another bot's chat is not this bot's to work
    assert await first.begin(5) == 1
    row = await second.next("tg2:1")
    assert row is not None and row.payload == "second's" and row.attempts == 0
    assert await second.finish(5, "tg2:1") is None
    left = await first.next("tg:1")
    assert left is not None and left.payload == "first's" and await first.depth() == 1


async def test_a_dead_letter_of_one_bot_never_reaches_the_other(
    inboxes: Inboxes,
    postgres_url: str,  # noqa: F811
) -> None:
    """Bot 2's given-up update 5 is listed as bot 2's; replaying it as the deployment's bot's
    finds nothing, as bot 2's queues it in bot 2's inbox only; dropping goes by bot too."""
    first, second = inboxes
    await first.put(5, "tg:1", "first's")
    await second.put(5, "tg2:1", "second's")
    await second.bury(5, "tg2:1", "second's", "attempts")
    connection = await asyncpg.connect(postgres_url)
    try:
        [letter] = await dead_letters.dead_letters(connection)
        assert (letter.bot, letter.update_id, letter.payload) == (2, 5, "second's")
        assert await dead_letters.dead_letters(connection, bot=0) == []
        assert not await dead_letters.replay(connection, 5)  # the deployment's bot has none
        assert not await dead_letters.drop(connection, 5)
        assert await dead_letters.replay(connection, 5, bot=2)
        assert await first.pending_chats() == ["tg:1"]
        row = await second.next("tg2:1")
        assert row is not None and row.payload == "second's"
        await second.bury(5, "tg2:1", "second's", "error")
        assert await dead_letters.drop(connection, 5, bot=2)
        assert await dead_letters.count_letters(connection) == 0
    finally:
        await connection.close()
    row = await first.next("tg:1")
    assert row is not None and row.payload == "first's"


async def test_undelivered_replies_of_the_same_chat_in_two_bots_are_apart(
    pool: asyncpg.Pool,
) -> None:
    """Each bot pops its own reply of chat 5, and forgetting one bot's chat keeps the other's."""
    first, second = PostgresUndelivered(pool), PostgresUndelivered(pool, bot=2)
    await first.put(5, None, '{"text": "first"}', "en")
    await second.put(5, None, '{"text": "second"}', "ru")
    assert await second.pop(5, None) == ('{"text": "second"}', "ru")
    assert await second.pop(5, None) is None
    await second.put(5, None, '{"text": "again"}', "ru")
    assert await second.forget_chat(5) == 1
    assert await first.pop(5, None) == ('{"text": "first"}', "en")


async def test_a_flood_wait_holds_the_chat_of_its_own_bot_only(pool: asyncpg.Pool) -> None:
    """Telegram limiting bot 2 in chat 5 does not hold chat 5 of the deployment's bot."""
    second_here = PostgresFloodWaits(pool, bot=2)
    await second_here.pause(5, 30)
    second_elsewhere, first = PostgresFloodWaits(pool, bot=2), PostgresFloodWaits(pool)
    assert await second_elsewhere.remaining(5) > 25
    assert await first.remaining(5) == 0


async def test_each_bots_listeners_hear_of_its_own_rows_only(
    inboxes: Inboxes,
    postgres_url: str,  # noqa: F811
) -> None:
    """A row queued in bot 2's inbox (put, or a dead letter replayed) wakes bot 2's
    listeners only, and the deployment's bot's wakes its own; an interrupt (a /reset)
    reaches the bot's own workers only. One channel for all would wake every bot's inbox
    on every worker for every row."""
    first, second = inboxes
    heard: dict[str, asyncio.Queue[str]] = {"first": asyncio.Queue(), "second": asyncio.Queue()}
    stopped: dict[str, asyncio.Queue[str]] = {"first": asyncio.Queue(), "second": asyncio.Queue()}
    for name, inbox in (("first", first), ("second", second)):
        inbox.on_interrupt(lambda chat, _id, name=name: stopped[name].put_nowait(chat))  # type: ignore[misc]
        await inbox.listen(heard[name].put_nowait)
    await second.put(7, "tg2:3", "second's")
    await first.put(8, "tg:3", "first's")
    assert await asyncio.wait_for(heard["second"].get(), 10) == "tg2:3"
    assert await asyncio.wait_for(heard["first"].get(), 10) == "tg:3"

    assert await second.begin(7) is not None  # its handling started: a /reset may stop it
    assert await second.interrupt("tg2:3", 99)
    assert await asyncio.wait_for(stopped["second"].get(), 10) == "tg2:3"

    await second.bury(7, "tg2:3", "second's", "attempts")
    connection = await asyncpg.connect(postgres_url)
    try:
        assert await dead_letters.replay(connection, 7, bot=2)
    finally:
        await connection.close()
    assert await asyncio.wait_for(heard["second"].get(), 10) == "tg2:3"
    await first.put(9, "tg:4", "first's")  # after everything above: the last to arrive
    assert await asyncio.wait_for(heard["first"].get(), 10) == "tg:4"
    assert heard["first"].empty() and heard["second"].empty()
    assert stopped["first"].empty()


async def test_every_bots_inbox_listens_on_one_connection_per_worker(
    postgres_url: str,  # noqa: F811
) -> None:
    """Four bots' inboxes of one worker listen on one connection, not four; a bot's view
    closed stops hearing while the others go on; after the connection broke, the next
    listen connects again for every bot still listening."""
    store = await PostgresStore.open(postgres_url)
    root = await PostgresInbox.open(postgres_url)
    views = [root, *(root.for_bot(bot) for bot in (2, 3, 4))]
    admin = await asyncpg.connect(postgres_url)
    heard: asyncio.Queue[str] = asyncio.Queue()
    listening = (
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND query LIKE '%LISTEN %' AND pid <> pg_backend_pid()"
    )
    try:
        for view in views:
            await view.listen(heard.put_nowait)
        assert len(await admin.fetch(listening)) == 1
        for view, key in zip(views, ("tg:1", "tg2:1", "tg3:1", "tg4:1"), strict=True):
            await view.put(11, key, "x")
            assert await asyncio.wait_for(heard.get(), 10) == key

        await views[2].close()  # bot 3 stopped
        await views[2].put(12, "tg3:2", "x")
        await views[3].put(12, "tg4:2", "x")
        assert await asyncio.wait_for(heard.get(), 10) == "tg4:2"

        [row] = await admin.fetch(listening)
        await admin.execute("SELECT pg_terminate_backend($1)", row["pid"])
        await asyncio.sleep(0.2)
        for view in (views[0], views[1], views[3]):
            await view.listen(heard.put_nowait)  # the periodic look's call
        assert len(await admin.fetch(listening)) == 1
        await views[1].put(13, "tg2:3", "x")
        assert await asyncio.wait_for(heard.get(), 10) == "tg2:3"
        await views[0].put(13, "tg:3", "x")
        assert await asyncio.wait_for(heard.get(), 10) == "tg:3"
        assert heard.empty()
    finally:
        await admin.close()
        for view in views[1:]:
            await view.close()
        await root.close()
        await store.close()
