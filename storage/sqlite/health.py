"""Is the store able to do its job: the file is still ours, it reads, and it writes.

Invariants:
- A store whose file was deleted or replaced since it was opened is unhealthy,
  and every write fails with `StoreUnavailable`: SQLite would keep writing into
  the orphaned file, losing everything at the next restart.
- Writability is proven by a write, not assumed: at most every `interval`
  seconds a schema change runs through the single writer and is rolled back
  (it needs a free page, so a full database or disk, a read-only file or a lock
  held by another process fails it). Results are cached in between.
- A write of a user that failed with a store fault makes the store unhealthy at
  once. A rolled-back probe cannot clear that (it never reaches the disk), so
  while a fault is on record the probe commits its change, and only a commit
  that succeeds makes the store healthy again.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from core.domain.errors import StoreUnavailable
from storage.sqlite.batch import BatchedConnection

log = logging.getLogger(__name__)


class FileIdentity:
    """The device and inode of the database file as opened; `check` compares the path now."""

    def __init__(self, path: Path) -> None:
        self._path = path
        status = os.stat(path)
        self._identity = (status.st_dev, status.st_ino)

    def check(self) -> None:
        """Raise `StoreUnavailable` if the path no longer names the file that is open."""
        try:
            status = os.stat(self._path)
        except OSError as error:
            raise StoreUnavailable(
                f"the database file {self._path} is gone ({error.strerror})"
            ) from error
        if (status.st_dev, status.st_ino) != self._identity:
            raise StoreUnavailable(f"the database file {self._path} was replaced by another file")


class _RolledBack(Exception):
    """Raised by the probe after its write, so the writer rolls the write back."""


def _probe(db: sqlite3.Connection, keep: bool) -> None:
    db.execute("CREATE TABLE health_probe (x)")
    db.execute("DROP TABLE health_probe")
    if not keep:
        raise _RolledBack


class StoreHealth:
    """Answers "can the store serve requests?" for `/healthz`; cheap enough to poll."""

    def __init__(
        self,
        writer: BatchedConnection,
        identity: FileIdentity,
        *,
        interval: float,
        clock: Callable[[], float],
    ) -> None:
        self._writer = writer
        self._identity = identity
        self._interval = interval
        self._clock = clock
        self._lock = asyncio.Lock()
        self._probed_at: float | None = None
        self._probe_problem: str | None = None
        self._reported: str | None = None

    async def problem(self) -> str | None:
        """None when healthy, else why not (one line for an operator)."""
        problem = await self._find_problem()
        if problem != self._reported:
            if problem is None:
                log.info("store healthy again")
            else:
                log.warning("store unhealthy: %s", problem)
            self._reported = problem
        return problem

    async def _find_problem(self) -> str | None:
        try:
            self._identity.check()
        except StoreUnavailable as error:
            return str(error)
        async with self._lock:
            if self._probed_at is None or self._clock() - self._probed_at >= self._interval:
                self._probe_problem = await self._run_probe()
                self._probed_at = self._clock()
        fault = self._writer.last_fault
        return str(fault) if fault is not None else self._probe_problem

    async def _run_probe(self) -> str | None:
        keep = self._writer.last_fault is not None
        try:
            await self._writer.run(functools.partial(_probe, keep=keep))
        except _RolledBack:
            return None
        except (StoreUnavailable, sqlite3.Error) as error:
            return str(error)
        return None
