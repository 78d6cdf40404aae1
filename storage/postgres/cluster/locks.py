"""`ChatLocks` across processes: PostgreSQL advisory locks keyed by the chat key.

Invariant: while one process is inside `hold(key)`, no other process sharing the
database (and no other task of this process) is inside `hold(key)` for the same key;
different keys never wait for each other.

How: within the process a `KeyedLock` orders the waiters, so each key is asked of the
database by one task at a time. Across processes, the holder owns a session-level
advisory lock on a 64-bit hash of the key, taken on one connection that this object
keeps for its lifetime (session locks belong to a connection; one connection can hold
the locks of many keys). It is taken with `pg_try_advisory_lock` and retried with a
short backoff, never with the blocking form: a blocked call would hold that shared
connection and stall every other key. When a process dies its connection closes and
PostgreSQL releases its locks at once, so a crashed worker never blocks a chat. If the
lock connection itself breaks while this process holds locks, the exclusivity may lapse
without notice; the store's compare-and-set on the round still keeps a consultation from
being advanced twice.

`PostgresLeadership` elects one process among many (the one that polls Telegram) the same
way, on a connection of its own.

`try_hold(key)` is the claim that never waits: it yields True while this task holds the
key, or False at once when another task of this process or another process has it (one
attempt at the database, no backoff).

The attempts and releases of all keys share the lock connection: those made while one
statement runs go together in the next (`storage.postgres.batch`), in the order they were made,
so under load a round trip carries the claims and releases of many chats.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager

import asyncpg

from core.domain.errors import StoreUnavailable
from core.primitives.keyed_lock import KeyedLock
from storage.postgres.batch import BatchedStatement
from storage.postgres.faults import is_unavailable, unavailable

RETRY_FIRST = 0.02
RETRY_MAX = 0.5


def lock_id(key: str) -> int:
    """A stable signed 64-bit id for `key` (PostgreSQL's advisory lock key space)."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresChatLocks:
    """Open with `await PostgresChatLocks.open(url)`; `close()` releases every lock."""

    def __init__(self, connection: asyncpg.Connection | None, url: str) -> None:
        self._connection = connection  # None: connected on first use
        self._url = url
        self._local = KeyedLock()
        # One statement at a time on the shared connection, carrying every request made
        # meanwhile: (True, id) takes a lock if free, (False, id) releases one.
        self._requests: BatchedStatement[tuple[bool, int], bool] = BatchedStatement(self._run)
        self._busy: Counter[str] = Counter()  # keys this process's tasks hold or wait for

    @classmethod
    async def open(cls, url: str) -> PostgresChatLocks:
        return cls(await asyncpg.connect(url, timeout=10), url)

    @classmethod
    def on_first_use(cls, url: str) -> PostgresChatLocks:
        """Locks whose connection opens with the first lock asked for (a process that may
        never need one keeps no connection for it)."""
        return cls(None, url)

    async def close(self) -> None:
        """Close the lock connection: PostgreSQL releases every lock it held."""
        if self._connection is None:
            return
        try:
            await self._connection.close(timeout=5)
        except Exception:  # already broken: drop it without a goodbye
            self._connection.terminate()

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        with self._in_use(key):
            async with self._local.hold(key):
                ident = lock_id(key)
                await self._acquire(ident)
                try:
                    yield
                finally:
                    await self._release(ident)

    @asynccontextmanager
    async def try_hold(self, key: str) -> AsyncIterator[bool]:
        """Yield True holding `key`, or False at once if anyone else holds or awaits it."""
        if self._busy[key]:
            yield False
            return
        with self._in_use(key):
            # Nobody of this process holds or awaits the key: the local lock is free at once.
            async with self._local.hold(key):
                ident = lock_id(key)
                if await self._try_lock(ident):
                    try:
                        yield True
                    finally:
                        await self._release(ident)
                    return
        yield False

    @contextmanager
    def _in_use(self, key: str) -> Iterator[None]:
        self._busy[key] += 1
        try:
            yield
        finally:
            self._busy[key] -= 1
            if not self._busy[key]:
                del self._busy[key]

    async def _acquire(self, ident: int) -> None:
        delay = RETRY_FIRST
        while not await self._try_lock(ident):
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)

    async def _try_lock(self, ident: int) -> bool:
        """One attempt; a cancelled attempt that took the lock after all gives it back."""
        attempt = asyncio.ensure_future(self._requests((True, ident)))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                if await attempt:
                    await self._release(ident)
            raise

    async def _release(self, ident: int) -> None:
        with contextlib.suppress(StoreUnavailable):  # the connection is gone, and the lock too
            await self._requests((False, ident))  # sent even if this task is cancelled

    async def _run(self, requests: Sequence[tuple[bool, int]]) -> list[bool]:
        try:
            if self._connection is None or self._connection.is_closed():
                if self._connection is not None:  # broken: its locks are gone already
                    self._connection.terminate()
                self._connection = await asyncpg.connect(self._url, timeout=10)
            rows = await self._connection.fetch(
                _LOCK_OR_UNLOCK, [take for take, _ in requests], [ident for _, ident in requests]
            )
        except Exception as error:
            if is_unavailable(error):
                raise unavailable(error, "lock connection") from error
            raise
        return [bool(row[0]) for row in rows]


_LOCK_OR_UNLOCK = (
    # Each (take, id) pair in order: try to take the lock, or release it.
    "SELECT CASE WHEN take THEN pg_try_advisory_lock(id) ELSE pg_advisory_unlock(id) END"
    " FROM unnest($1::boolean[], $2::bigint[]) WITH ORDINALITY AS request (take, id, n)"
    " ORDER BY n"
)


class PostgresLeadership:
    """At most one leader among the processes that use the same `name`: the leader holds
    a session advisory lock on a connection of its own.

    Invariant: `held()` is True only while that connection is alive, and the lock lives
    exactly as long as the connection: when the leader dies or its connection breaks,
    PostgreSQL releases the lock and the next `try_acquire` anywhere can take it.
    """

    def __init__(self, url: str, name: str) -> None:
        self._url = url
        self._ident = lock_id("leader:" + name)
        self._connection: asyncpg.Connection | None = None
        self._leading = False

    async def try_acquire(self) -> bool:
        """True if this process leads (already, or from now on); never waits for the lock."""
        if await self.held():
            return True
        try:
            if self._connection is None or self._connection.is_closed():
                self._connection = await asyncpg.connect(self._url, timeout=10)
            self._leading = bool(
                await self._connection.fetchval("SELECT pg_try_advisory_lock($1)", self._ident)
            )
        except Exception as error:
            self._drop()
            if is_unavailable(error):
                raise unavailable(error, "leadership connection") from error
            raise
        return self._leading

    async def held(self) -> bool:
        """Whether this process still leads: its lock connection answers."""
        if not self._leading or self._connection is None:
            return False
        try:
            await self._connection.fetchval("SELECT 1", timeout=10)
        except Exception:  # whatever the failure, leading is no longer proven
            self._drop()
            return False
        return True

    async def close(self) -> None:
        """Give up leadership (the connection closes, and the lock with it)."""
        connection, self._connection, self._leading = self._connection, None, False
        if connection is not None:
            try:
                await connection.close(timeout=5)
            except Exception:  # already broken: drop it without a goodbye
                connection.terminate()

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.terminate()
        self._connection, self._leading = None, False


@asynccontextmanager
async def try_exclusive(pool: asyncpg.Pool, name: str) -> AsyncIterator[bool]:
    """Yield True to the one caller (across all processes) that got `name`, False at once
    to any other while it is held.

    The lock is transaction-scoped (`pg_try_advisory_xact_lock`) on a connection held for
    the block, so it is released however the block ends, and at once if this process dies.
    """
    inside = False
    try:
        async with pool.acquire() as connection, connection.transaction():
            mine = bool(
                await connection.fetchval(
                    "SELECT pg_try_advisory_xact_lock($1)", lock_id("exclusive:" + name)
                )
            )
            inside = True
            yield mine
            inside = False  # what fails from here is the commit's: the database's
    except Exception as error:
        if inside or not is_unavailable(error):  # the block's own failure, not the lock's
            raise
        raise unavailable(error) from error
