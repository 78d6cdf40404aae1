"""The inbox's attempts, dead letters and interrupts on PostgreSQL; two inbox objects stand
for two worker processes on one database."""

from __future__ import annotations

import asyncio

import asyncpg

from storage.postgres.cluster.dead_letters import dead_letters
from storage.postgres.cluster.inbox import PostgresInbox
from tests.postgres import postgres_url  # noqa: F401  (fixture)
from tests.storage.test_pg_inbox import inboxes  # noqa: F401  (fixture)


async def test_attempts_are_counted_by_begin_and_read_with_the_row(
    inboxes: tuple[PostgresInbox, PostgresInbox],  # noqa: F811
) -> None:
    """Begins made together are counted each; `next` and `finish` give the count; a row
    gone is None."""
    first, second = inboxes
    await first.put(1, "tg:1", "a")
    await first.put(2, "tg:1", "b")
    assert await first.begin(1) == 1
    assert await asyncio.gather(first.begin(1), first.begin(2), first.begin(3)) == [2, 1, None]
    row = await second.next("tg:1")
    assert row is not None and (row.update_id, row.attempts) == (1, 2)
    following = await second.finish(1, "tg:1")
    assert following is not None and (following.update_id, following.attempts) == (2, 1)


async def test_bury_moves_a_row_to_the_dead_letters_in_one_piece(
    postgres_url: str,  # noqa: F811
    inboxes: tuple[PostgresInbox, PostgresInbox],  # noqa: F811
) -> None:
    """A waiting row keeps its attempts; an update never queued is recorded with one; the
    inbox no longer has either."""
    first, _ = inboxes
    await first.put(5, "tg:5", "queued")
    await first.begin(5)
    await first.begin(5)
    await first.bury(5, "tg:5", "queued", "deadline")
    await first.bury(6, "tg:6", "never queued", "error")
    assert await first.depth() == 0
    db = await asyncpg.connect(postgres_url)
    try:
        letters = await dead_letters(db)
    finally:
        await db.close()
    assert [(d.update_id, d.chat_key, d.payload, d.attempts, d.reason) for d in letters] == [
        (6, "tg:6", "never queued", 1, "error"),
        (5, "tg:5", "queued", 2, "deadline"),
    ]


async def test_an_interrupt_names_the_chats_started_update_to_every_worker(
    inboxes: tuple[PostgresInbox, PostgresInbox],  # noqa: F811
) -> None:
    """Only a started row older than the command is named; a row not started, a later one
    or another chat's is not."""
    first, second = inboxes
    heard: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    second.on_interrupt(lambda chat, update_id: heard.put_nowait((chat, update_id)))
    await second.listen(lambda _chat: None)
    await first.put(10, "tg:1", "running")
    await first.put(11, "tg:1", "waiting")
    await first.put(20, "tg:2", "other chat, started")
    await first.begin(20)
    assert await first.interrupt("tg:1", 12) is False  # 10 has not started
    await first.begin(10)
    assert await first.interrupt("tg:1", 10) is False  # the command came before it
    assert await first.interrupt("tg:1", 12) is True
    assert await asyncio.wait_for(heard.get(), 10) == ("tg:1", 10)
    assert heard.empty()
