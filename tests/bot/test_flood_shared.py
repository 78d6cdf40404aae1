"""Telegram's flood control per chat shared by worker processes: a RetryAfter one worker
receives for a chat holds back every worker's sends to that chat (PostgreSQL; two pools
on one database stand for two workers)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio
from telegram.error import RetryAfter

from bot.transport.flood import ChatFloodControl
from storage.postgres.cluster.flood_waits import PostgresFloodWaits
from storage.postgres.cluster.pool import open_shared_pool
from storage.postgres.store import PostgresStore
from tests.port_contract import Clock
from tests.postgres import postgres_url  # noqa: F401  (fixture)

Pools = tuple[asyncpg.Pool, asyncpg.Pool]


@pytest_asyncio.fixture
async def pools(postgres_url: str) -> AsyncIterator[Pools]:  # noqa: F811
    store = await PostgresStore.open(postgres_url)
    first = await open_shared_pool(postgres_url)
    second = await open_shared_pool(postgres_url)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()
        await store.close()


async def test_a_retry_after_on_one_worker_holds_back_the_others(pools: Pools) -> None:
    """Worker A is told to wait in chat 1; worker B's next send to chat 1 waits until then,
    while B's sends to chat 2 go at once."""
    a = ChatFloodControl(max_retries=0, waits=PostgresFloodWaits(pools[0]))
    b = ChatFloodControl(max_retries=0, waits=PostgresFloodWaits(pools[1], refresh=0))
    loop = asyncio.get_running_loop()
    sent: list[tuple[int, float]] = []

    async def refused() -> dict:
        raise RetryAfter(1)

    async def accepted(chat_id: int) -> dict:
        sent.append((chat_id, loop.time()))
        return {"ok": True}

    start = loop.time()
    with pytest.raises(RetryAfter):
        await a.process_request(refused, (), {}, "sendMessage", {"chat_id": 1}, None)
    held = asyncio.create_task(
        b.process_request(accepted, (1,), {}, "sendMessage", {"chat_id": 1}, None)
    )
    await b.process_request(accepted, (2,), {}, "sendMessage", {"chat_id": 2}, None)
    await held
    assert [chat for chat, _ in sent] == [2, 1]  # chat 2 went while chat 1 was held
    assert sent[1][1] - start >= 1.0


async def test_other_workers_waits_are_read_through_a_short_cache(pools: Pools) -> None:
    """A wait written by another worker is seen once the copy is `refresh` seconds old, not
    before (sends in between cost no query); a wait written here is seen at once; a wait
    that is over is gone."""
    clock = Clock()
    a = PostgresFloodWaits(pools[0], refresh=0.5, clock=clock)
    b = PostgresFloodWaits(pools[1], refresh=0.5, clock=clock)
    assert await b.remaining(1) == 0.0
    await a.pause(1, 30)
    assert await a.remaining(1) == 30.0
    assert await b.remaining(1) == 0.0  # b's copy is fresh: no query yet
    clock.now += 0.5
    assert await b.remaining(1) == 29.5
    await b.pause(1, 5)  # an earlier end does not shorten the recorded wait
    clock.now += 0.5
    assert await a.remaining(1) == 29.0
    clock.now += 30
    assert await b.remaining(1) == 0.0 and b.tracked() == 0
    assert await a.forget_past() == 1


async def test_a_shorter_wait_recorded_later_does_not_shorten_the_shared_one(pools: Pools) -> None:
    """Worker A is told to wait 30 s, then worker B 5 s for the same chat: a worker that has
    recorded neither (a third one, or a restarted one) still waits the 30 s."""
    clock = Clock()
    a = PostgresFloodWaits(pools[0], clock=clock)
    b = PostgresFloodWaits(pools[1], clock=clock)
    await a.pause(1, 30)
    await b.pause(1, 5)

    fresh = PostgresFloodWaits(pools[1], clock=clock)
    assert await fresh.remaining(1) == 30.0


async def test_a_wait_the_database_would_not_record_is_still_kept_by_this_worker(
    pools: Pools,
) -> None:
    """When writing a RetryAfter fails (the database cancels the statement), this worker
    keeps the wait across every refresh of its copy until it is over, and still sees the
    waits other workers record."""
    clock = Clock()
    a = PostgresFloodWaits(pools[0], refresh=0.5, clock=clock)
    b = PostgresFloodWaits(pools[1], refresh=0.5, clock=clock)
    async with pools[1].acquire() as connection:
        await connection.execute(
            "CREATE FUNCTION refuse_chat_1() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN IF NEW.chat_id = 1 THEN"
            " RAISE EXCEPTION 'canceling statement due to statement timeout'"
            " USING ERRCODE = 'query_canceled'; END IF; RETURN NEW; END $$;"
            " CREATE TRIGGER refuse_chat_1 BEFORE INSERT OR UPDATE ON flood_waits"
            " FOR EACH ROW EXECUTE FUNCTION refuse_chat_1()"
        )
    await a.pause(1, 30)  # not recorded: logged, kept here
    await b.pause(2, 10)
    assert await a.remaining(1) == 30.0
    clock.now += 0.5
    assert await a.remaining(1) == 29.5  # the copy was refreshed from the database
    assert await a.remaining(2) == 9.5
    clock.now += 20
    assert await a.remaining(1) == 9.5
    clock.now += 10
    assert await a.remaining(1) == 0.0 and a.tracked() == 0
