"""Chat locks across processes (PostgreSQL advisory locks): two lock objects stand for two
worker processes on one database."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from fakes.tcp_relay import TcpRelay
from storage.postgres.cluster.locks import PostgresChatLocks, PostgresLeadership, lock_id
from tests.postgres import postgres_url  # noqa: F401  (fixture)


@pytest_asyncio.fixture
async def workers(postgres_url: str) -> AsyncIterator[tuple[PostgresChatLocks, PostgresChatLocks]]:  # noqa: F811
    first = await PostgresChatLocks.open(postgres_url)
    second = await PostgresChatLocks.open(postgres_url)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def test_one_key_is_held_by_one_process_at_a_time(
    workers: tuple[PostgresChatLocks, PostgresChatLocks],
) -> None:
    """The second process waits for the key until the first lets it go."""
    first, second = workers
    events: list[str] = []
    inside = asyncio.Event()

    async def slow() -> None:
        async with first.hold("tg:1"):
            events.append("first in")
            inside.set()
            await asyncio.sleep(0.3)
            events.append("first out")

    async def waiting() -> None:
        await inside.wait()
        async with second.hold("tg:1"):
            events.append("second in")

    await asyncio.wait_for(asyncio.gather(slow(), waiting()), 10)
    assert events == ["first in", "first out", "second in"]


async def test_different_keys_do_not_wait_for_each_other(
    workers: tuple[PostgresChatLocks, PostgresChatLocks],
) -> None:
    first, second = workers
    async with first.hold("tg:1"):
        await asyncio.wait_for(_enter(second, "tg:2"), 5)
        await asyncio.wait_for(_enter(first, "tg:3"), 5)  # one connection holds many keys


async def test_tasks_of_one_process_take_turns_too(
    workers: tuple[PostgresChatLocks, PostgresChatLocks],
) -> None:
    """Session locks are re-entrant in PostgreSQL; the process still orders its own tasks."""
    first, _ = workers
    order: list[int] = []

    async def turn(n: int) -> None:
        async with first.hold("tg:1"):
            order.append(n)
            await asyncio.sleep(0.05)
            order.append(n)

    await asyncio.wait_for(asyncio.gather(turn(1), turn(2)), 10)
    assert order in ([1, 1, 2, 2], [2, 2, 1, 1])


async def test_a_dead_process_releases_its_keys(
    postgres_url: str,  # noqa: F811
    workers: tuple[PostgresChatLocks, PostgresChatLocks],
) -> None:
    """A worker killed while holding a key (its connection closed) blocks nobody."""
    first, second = workers
    held = asyncio.Event()
    never = asyncio.Event()

    async def holder() -> None:
        async with first.hold("tg:1"):
            held.set()
            await never.wait()

    task = asyncio.create_task(holder())
    await held.wait()
    admin = await asyncpg.connect(postgres_url)
    try:
        pids = await admin.fetch(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND ((classid::bigint << 32) | objid::bigint) = $1",
            lock_id("tg:1"),
        )
        assert len(pids) == 1
        await admin.execute("SELECT pg_terminate_backend($1)", pids[0]["pid"])
    finally:
        await admin.close()
    await asyncio.wait_for(_enter(second, "tg:1"), 10)
    task.cancel()
    with pytest.raises((asyncio.CancelledError, Exception)):
        await task


async def test_a_cancelled_wait_leaves_no_lock_behind(
    workers: tuple[PostgresChatLocks, PostgresChatLocks],
) -> None:
    """A turn stopped while waiting for the key (a /reset) does not keep it afterwards."""
    first, second = workers
    async with first.hold("tg:1"):
        waiter = asyncio.create_task(_enter(second, "tg:1"))
        await asyncio.sleep(0.1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    await asyncio.wait_for(_enter(first, "tg:1"), 5)
    await asyncio.wait_for(_enter(second, "tg:1"), 5)


async def _enter(locks: PostgresChatLocks, key: str) -> None:
    async with locks.hold(key):
        pass


async def test_try_hold_says_false_at_once_when_another_process_holds_the_key(
    workers: tuple[PostgresChatLocks, PostgresChatLocks],
) -> None:
    """A non-blocking claim: False while the other process holds the key, True once it is
    free, and a claim that got the key keeps others out until it ends."""
    first, second = workers
    async with first.hold("inbox:tg:1"):
        async with second.try_hold("inbox:tg:1") as held:
            assert held is False
        async with second.try_hold("inbox:tg:2") as other:
            assert other is True
    async with second.try_hold("inbox:tg:1") as held:
        assert held is True
        async with first.try_hold("inbox:tg:1") as again:
            assert again is False
    async with first.try_hold("inbox:tg:1") as held:
        assert held is True


async def test_try_hold_says_false_while_another_task_of_this_process_holds_the_key(
    workers: tuple[PostgresChatLocks, PostgresChatLocks],
) -> None:
    """PostgreSQL would grant a session lock twice to one connection; the process itself
    refuses a second claim by one of its own tasks, whether it came by `hold` or `try_hold`."""
    first, second = workers
    async with first.try_hold("inbox:tg:1") as held:
        assert held is True
        async with first.try_hold("inbox:tg:1") as again:
            assert again is False
    async with first.hold("inbox:tg:1"), first.try_hold("inbox:tg:1") as held:
        assert held is False
    async with second.try_hold("inbox:tg:1") as held:
        assert held is True


async def test_a_leader_whose_lock_connection_died_no_longer_leads(
    postgres_url: str,  # noqa: F811
) -> None:
    """The leader's connection is terminated (a network cut, a database restart): `held()`
    asks the database and says False, and another process takes the lead, so two never
    poll at once."""
    name = f"test-leader-{uuid.uuid4().hex}"
    first = PostgresLeadership(postgres_url, name)
    second = PostgresLeadership(postgres_url, name)
    try:
        assert await first.try_acquire() is True
        assert await second.try_acquire() is False
        assert await first.held() is True
        admin = await asyncpg.connect(postgres_url)
        try:
            terminated = await admin.fetchval(  # returns once the backend is gone
                "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_locks"
                " WHERE locktype = 'advisory' AND granted"
                " AND ((classid::bigint << 32) | objid::bigint) = $1",
                lock_id("leader:" + name),
            )
            assert terminated == 1
        finally:
            await admin.close()
        assert await first.held() is False
        assert await second.try_acquire() is True
    finally:
        await first.close()
        await second.close()


async def test_a_leader_that_lost_its_connection_unawares_no_longer_leads(
    postgres_url: str,  # noqa: F811
) -> None:
    """A network device forgets the leader's connection: the server ends the session (and
    frees the lock) while the leader's socket still looks open. `held()` asks the database
    instead of trusting the socket, so it says False and the leader stops polling; another
    process takes the lead."""
    relay = await TcpRelay.start(postgres_url)
    name = f"test-leader-{uuid.uuid4().hex}"
    first = PostgresLeadership(relay.relayed_url, name)
    second = PostgresLeadership(postgres_url, name)
    try:
        assert await first.try_acquire() is True
        assert await second.try_acquire() is False
        relay.lose_connections()

        assert await first.held() is False
        for _ in range(200):  # the server frees the lock once it notices the session ended
            if await second.try_acquire():
                break
            await asyncio.sleep(0.05)
        assert await second.held() is True
    finally:
        await first.close()
        await second.close()
        await relay.stop()
