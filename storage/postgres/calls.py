"""The PostgreSQL store's calls on its pool: counted, ordered, and ended by `close`.

`StoreCalls` is the base of `storage.postgres.store.PostgresStore`: it owns the pool and runs
every call of the store on it; the store says what each call does.

Invariants:
- A call is counted from the moment it is made, not from when it gets a connection, so
  `close` waits for every call made before it and closes the pool only once none is
  left; a call made after `close` (when none is left) raises `StoreUnavailable`.
- `_write` runs its work in one transaction: all of it is committed, or nothing (the
  transaction rolls back).
- Writes to one consultation from this process commit in the order they were made (a
  FIFO lock per consultation id, `_ordered`), as they would through one connection.
- A lost connection or a database that does not answer reaches callers as
  `StoreUnavailable` (`storage.postgres.pool.call`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import asyncpg

from core.domain.errors import StoreUnavailable
from core.primitives.keyed_lock import KeyedLock
from storage.postgres.pool import call

T = TypeVar("T")


class StoreCalls:
    """A pool and the calls in flight on it; `close()` ends them."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._closed = False
        self._ordered = KeyedLock()
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def close(self) -> None:
        """Finish the calls already made, then close the pool; a second call does nothing.

        A write submitted before `close` is committed, never dropped; a call made after
        it raises `StoreUnavailable`.
        """
        if self._closed:
            return
        self._closed = True
        await self._idle.wait()
        await self._pool.close()

    async def _write(
        self, work: Callable[[asyncpg.Connection], Awaitable[T]], *, consultation: str = ""
    ) -> T:
        """Run `work` in one transaction: all of it is committed, or nothing.

        Writes to one consultation from this process commit in the order they were made
        (a FIFO lock per consultation id), as they would through one connection.
        """

        async def in_transaction(connection: asyncpg.Connection) -> T:
            async with connection.transaction():
                return await work(connection)

        if not consultation:
            return await self._call(in_transaction)
        async with self._tracked(), self._ordered.hold(consultation):
            return await self._call(in_transaction)

    async def _call(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        async with self._tracked():
            return await call(self._pool, work)

    @asynccontextmanager
    async def _tracked(self) -> AsyncIterator[None]:
        """Count a call from when it is made, so `close` waits for it; refuse one after."""
        self._enter()
        try:
            yield
        finally:
            self._leave()

    def _enter(self) -> None:
        if self._closed and self._in_flight == 0:
            raise StoreUnavailable("the store is closed")
        self._in_flight += 1
        self._idle.clear()

    def _leave(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self._idle.set()
