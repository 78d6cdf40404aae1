"""The inbox on PostgreSQL: accepted Telegram updates waiting to be handled, per chat in
update_id order; two inbox objects stand for two worker processes on one database."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio

from storage.postgres.cluster.inbox import PostgresInbox
from storage.postgres.schema import migrate
from tests.postgres import database_url_for_tests, postgres_url, with_search_path  # noqa: F401


@pytest_asyncio.fixture
async def inboxes(postgres_url: str) -> AsyncIterator[tuple[PostgresInbox, PostgresInbox]]:  # noqa: F811
    admin = await asyncpg.connect(postgres_url)
    try:
        await migrate(admin)
    finally:
        await admin.close()
    first = await PostgresInbox.open(postgres_url)
    second = await PostgresInbox.open(postgres_url)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def test_an_update_is_accepted_once_even_after_it_was_handled(
    inboxes: tuple[PostgresInbox, PostgresInbox],
) -> None:
    """A redelivery is refused while the row waits and after it was handled and deleted."""
    first, second = inboxes
    assert await first.put(10, "tg:1", '{"update_id": 10}') is True
    assert await second.put(10, "tg:1", '{"update_id": 10}') is False
    assert await first.depth() == 1
    row = await first.next("tg:1")
    assert row is not None and row[:2] == (10, '{"update_id": 10}')
    await first.finish(10, "tg:1")
    assert await first.depth() == 0
    assert await second.put(10, "tg:1", '{"update_id": 10}') is False
    assert await first.next("tg:1") is None


async def test_a_chat_gives_its_rows_lowest_update_id_first(
    inboxes: tuple[PostgresInbox, PostgresInbox],
) -> None:
    first, second = inboxes
    for update_id in (12, 11, 13):
        await first.put(update_id, "tg:1", f"u{update_id}")
    await first.put(5, "tg:2", "u5")
    seen = []
    while (row := await second.next("tg:1")) is not None:
        seen.append(row[:2])
        await second.finish(row.update_id, "tg:1")
    assert seen == [(11, "u11"), (12, "u12"), (13, "u13")]
    other = await first.next("tg:2")
    assert other is not None and other[:2] == (5, "u5")


async def test_pending_chats_oldest_first_without_the_excluded_ones(
    inboxes: tuple[PostgresInbox, PostgresInbox],
) -> None:
    first, _ = inboxes
    await first.put(30, "tg:3", "a")
    await first.put(10, "tg:1", "b")
    await first.put(20, "tg:2", "c")
    await first.put(31, "tg:1", "d")
    assert await first.pending_chats() == ["tg:1", "tg:2", "tg:3"]
    assert await first.pending_chats(exclude={"tg:1"}) == ["tg:2", "tg:3"]
    assert await first.pending_chats(limit=2) == ["tg:1", "tg:2"]
    assert await first.pending_chats(exclude={"tg:1", "tg:2", "tg:3"}) == []


async def test_remember_records_an_id_without_queueing_it(
    inboxes: tuple[PostgresInbox, PostgresInbox],
) -> None:
    """An update handled at once (not queued) still refuses its redeliveries."""
    first, second = inboxes
    assert await first.remember(40) is True
    assert await second.remember(40) is False
    assert await second.put(40, "tg:1", "x") is False
    assert await first.depth() == 0


async def test_listeners_hear_of_each_new_row_with_its_chat(
    inboxes: tuple[PostgresInbox, PostgresInbox],
) -> None:
    """Every process listening is woken with the chat key; a redelivery wakes nobody."""
    first, second = inboxes
    heard: asyncio.Queue[str] = asyncio.Queue()
    await second.listen(heard.put_nowait)
    await second.listen(heard.put_nowait)  # listening again does not double the wake-ups
    await first.put(50, "tg:5", "x")
    assert await asyncio.wait_for(heard.get(), 10) == "tg:5"
    await first.put(50, "tg:5", "x")
    await first.put(51, "tg:6", "y")
    assert await asyncio.wait_for(heard.get(), 10) == "tg:6"
    assert heard.empty()


async def test_an_inbox_in_another_schema_wakes_nobody_here(
    postgres_url: str,  # noqa: F811
    inboxes: tuple[PostgresInbox, PostgresInbox],
) -> None:
    """Notifications are database-wide; a deployment in another schema of the same database
    has a channel of its own."""
    first, _ = inboxes
    heard: asyncio.Queue[str] = asyncio.Queue()
    await first.listen(heard.put_nowait)
    schema = f"other_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
        elsewhere_url = with_search_path(database_url_for_tests(), schema)
        other = await asyncpg.connect(elsewhere_url)
        try:
            await migrate(other)
        finally:
            await other.close()
        elsewhere = await PostgresInbox.open(elsewhere_url)
        try:
            await elsewhere.put(60, "tg:elsewhere", "x")
            await first.put(61, "tg:here", "y")
            assert await asyncio.wait_for(heard.get(), 10) == "tg:here"
            assert heard.empty()
        finally:
            await elsewhere.close()
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()


async def test_puts_made_together_are_each_answered_for_their_own_id(
    inboxes: tuple[PostgresInbox, PostgresInbox],
) -> None:
    """Concurrent puts are written in batches: each caller still learns whether its own id
    was new, an id put twice at once is queued once, and nothing is lost."""
    first, second = inboxes
    await first.put(7, "tg:7", "seen before")
    ids = [n % 40 for n in range(80)]  # every id twice, 7 also seen before
    results = await asyncio.gather(
        *((first if n % 2 else second).put(i, f"tg:{i % 5}", f"u{i}") for n, i in enumerate(ids))
    )
    accepted = [i for i, new in zip(ids, results, strict=True) if new]
    assert sorted(accepted) == [i for i in range(40) if i != 7]
    assert await first.depth() == 40
    order = []
    for chat in ["tg:0", "tg:1", "tg:2", "tg:3", "tg:4", "tg:7"]:
        while (row := await first.next(chat)) is not None:
            order.append(row.update_id)
            await first.finish(row.update_id, chat)
    assert sorted(order) == list(range(40))


async def test_finish_deletes_the_row_and_hands_over_the_chats_next_one(
    inboxes: tuple[PostgresInbox, PostgresInbox],
) -> None:
    first, second = inboxes
    for update_id in (21, 22, 23):
        await first.put(update_id, "tg:2", f"u{update_id}")
    await first.put(24, "tg:3", "other chat")
    row = await second.next("tg:2")
    seen = []
    while row is not None:
        seen.append(row.update_id)
        row = await second.finish(row.update_id, "tg:2")
    assert seen == [21, 22, 23]
    assert await first.depth() == 1
    assert await first.next("tg:3") is not None


async def test_looks_made_together_each_see_their_own_chats_first_row(
    inboxes: tuple[PostgresInbox, PostgresInbox],
) -> None:
    first, _ = inboxes
    for update_id in (40, 41, 50):
        await first.put(update_id, f"tg:{update_id // 10}", f"u{update_id}")
    rows = await asyncio.gather(*(first.next(f"tg:{chat}") for chat in (4, 5, 6, 4)))
    assert [None if row is None else row.update_id for row in rows] == [40, 50, None, 40]


async def test_finish_hands_over_the_lowest_update_id_whatever_order_rows_were_written_in(
    inboxes: tuple[PostgresInbox, PostgresInbox],
) -> None:
    """Rows of a chat written out of order (two workers queueing at once, a redelivery
    queued late) still come out of `finish` lowest update_id first: the chat's messages are
    handled in the order the user sent them."""
    first, second = inboxes
    written = [75, 71, 78, 72, 77, 70, 74, 79, 73, 76]
    for update_id in written:
        await (first if update_id % 2 else second).put(update_id, "tg:7", f"u{update_id}")
    row = await second.next("tg:7")
    seen = []
    while row is not None:
        seen.append(row.update_id)
        row = await second.finish(row.update_id, "tg:7")
    assert seen == sorted(written)
