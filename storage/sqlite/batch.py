"""Run store operations on an aiosqlite connection's thread, many per round trip.

Invariants:
- Every operation is a synchronous function of a `sqlite3.Connection`, run on
  the aiosqlite connection's own thread, so no other statement can interleave
  with it and no await can split it.
- Writes (`run_writes`): the operations that arrived while the previous batch
  ran share one transaction, each under its own SAVEPOINT — a write that
  raises is rolled back alone, the others commit. A caller is answered only
  after the COMMIT containing its write returned: a write that returned is
  durable. A batch holding a deletion (`storage.sqlite.erasure.Erasing`) also
  truncates the WAL before answering.
- Reads (`run_reads`): a batch runs in one read transaction, so each read sees
  one committed snapshot, taken after every write that had returned.
- A batch that fails as a whole (SQLite rolled the transaction back, COMMIT
  failed) fails every caller in it: nothing of it was committed.
- Errors caused by the file or the disk reach callers as
  `core.domain.errors.StoreUnavailable` (see `storage.sqlite.faults`); `guard`, when given,
  runs before each batch and fails it the same way (a file deleted or replaced).
- Operations run in submission order. A caller cancelled while waiting does
  not un-submit its operation (as with any statement already sent to SQLite);
  the store stays consistent either way.

Why: with a lock around BEGIN … COMMIT, every statement is a thread round
trip (~60 µs here) and every write its own commit: ~4,000 commits/s, so 500
chats writing at once queue for over 100 ms. Batching costs one round trip
(and for writes one commit) per batch instead.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

import aiosqlite

from core.domain.errors import StoreUnavailable
from storage.sqlite import erasure
from storage.sqlite.faults import translate

T = TypeVar("T")
Op = Callable[[sqlite3.Connection], Any]
Outcome = tuple[bool, Any]  # (True, result) or (False, exception)
Runner = Callable[[sqlite3.Connection, list[Op]], list[Outcome]]


def run_writes(conn: sqlite3.Connection, ops: list[Op]) -> list[Outcome]:
    """Run `ops` in one write transaction, each all-or-nothing."""
    outcomes: list[Outcome] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        if len(ops) == 1:  # the common idle case: the transaction is the savepoint
            try:
                outcomes.append((True, ops[0](conn)))
            except Exception as error:
                conn.rollback()
                return [(False, error)]
        else:
            for op in ops:
                conn.execute("SAVEPOINT op")
                try:
                    outcomes.append((True, op(conn)))
                except Exception as error:
                    if not conn.in_transaction:
                        # SQLite rolled the whole transaction back (disk full, I/O
                        # error): the writes before this one are gone too.
                        raise
                    conn.execute("ROLLBACK TO op")
                    outcomes.append((False, error))
                conn.execute("RELEASE op")
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    erasure.after_commit(conn, ops)
    return outcomes


def run_reads(conn: sqlite3.Connection, ops: list[Op]) -> list[Outcome]:
    """Run `ops` in one read transaction: one snapshot for all of them."""
    outcomes: list[Outcome] = []
    conn.execute("BEGIN")
    try:
        for op in ops:
            try:
                outcomes.append((True, op(conn)))
            except Exception as error:
                outcomes.append((False, error))
    finally:
        conn.rollback()  # nothing to keep; ends the snapshot
    return outcomes


class BatchedConnection:
    """Submits operations to `db`'s thread, batching those that arrive while one batch runs."""

    def __init__(
        self, db: aiosqlite.Connection, runner: Runner, *, guard: Callable[[], None] | None = None
    ) -> None:
        self._db = db
        self._runner = runner
        self._guard = guard
        self._pending: list[tuple[Op, asyncio.Future[Any]]] = []
        self._drain: asyncio.Task[None] | None = None
        self.last_fault: StoreUnavailable | None = None
        """The store fault of the most recent operation, None once one succeeds again."""

    async def run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """Run `op` on the connection's thread (in a batch); return its result."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending.append((op, future))
        if self._drain is None:
            self._drain = asyncio.create_task(self._drain_pending())
        return await future

    async def flush(self) -> None:
        """Wait until every operation submitted so far has finished."""
        while self._drain is not None:
            await asyncio.shield(self._drain)

    async def _drain_pending(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    if self._guard is not None:
                        self._guard()
                    # aiosqlite has no public "run this callable on your thread";
                    # Connection._execute is exactly that (unchanged from 0.17 to 0.22).
                    outcomes = await self._db._execute(
                        self._runner, self._db._conn, [op for op, _ in batch]
                    )
                except asyncio.CancelledError:  # the loop is shutting down
                    for _, future in batch + self._pending:
                        future.cancel()
                    raise
                except ValueError as error:  # aiosqlite: the connection is closed
                    closed = StoreUnavailable("the database is closed")
                    closed.__cause__ = error
                    outcomes = [(False, closed)] * len(batch)
                except Exception as error:  # BEGIN/COMMIT failed, the whole batch rolled back
                    outcomes = [(False, error)] * len(batch)
                for (_, future), (ok, value) in zip(batch, outcomes, strict=True):
                    if not ok:
                        value = translate(value)
                    self._note(ok, value)
                    if future.done():  # the caller was cancelled
                        continue
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
        finally:
            self._drain = None

    def _note(self, ok: bool, value: Any) -> None:
        if ok:
            self.last_fault = None
        elif isinstance(value, StoreUnavailable):
            self.last_fault = value
