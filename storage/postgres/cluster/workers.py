"""The bot workers seen on PostgreSQL: one row per running worker process, for the operator.

Invariants:
- A worker's row is its own: it upserts it at start and on every beat (`beat`) and deletes
  it when it stops cleanly (`leave`); a beat also purges the rows of workers not seen for
  `FORGET_AFTER` seconds (those that died without leaving), through the index on
  `last_seen_at`, and never its own.
- Times are each worker's wall clock (Unix seconds), as the inbox's arrival times are.
- Every call is one statement; `seen` reads at most `limit` rows, the most recently seen
  first, and counts the workers seen since a given time over the whole table (one row per
  worker of the last day: a handful).
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

import asyncpg

FORGET_AFTER = 86_400.0
"""A worker not seen for this long is forgotten (its row purged by another's beat)."""


@dataclass(frozen=True, slots=True)
class Worker:
    worker_id: str  # generated when the process starts
    host: str
    pid: int
    started_at: float
    last_seen_at: float


@dataclass(frozen=True, slots=True)
class Seen:
    recent: int  # workers whose last beat is at or after the time asked
    workers: tuple[Worker, ...]  # the most recently seen first, at most the limit asked


def this_process(now: float) -> Worker:
    """A new identity for the running process, started `now`."""
    return Worker(uuid.uuid4().hex, socket.gethostname(), os.getpid(), now, now)


async def beat(connection: asyncpg.Connection, worker: Worker, at: float) -> None:
    """Record `worker` as seen `at` (its row made on the first beat), forgetting the
    workers not seen for `FORGET_AFTER` seconds."""
    await connection.execute(
        _BEAT, worker.worker_id, worker.host, worker.pid, worker.started_at, at, FORGET_AFTER
    )


async def leave(connection: asyncpg.Connection, worker_id: str) -> None:
    """Delete the worker's row (it stopped cleanly)."""
    await connection.execute("DELETE FROM workers WHERE worker_id = $1", worker_id)


async def seen(connection: asyncpg.Connection, since: float, limit: int = 50) -> Seen:
    """The workers known, the most recently seen first (at most `limit`), and how many of
    all of them were seen at or after `since`."""
    rows = await connection.fetch(_SEEN, since, limit)
    return Seen(
        int(rows[0]["recent"]) if rows else 0,
        tuple(
            Worker(
                str(row["worker_id"]),
                str(row["host"]),
                int(row["pid"]),
                float(row["started_at"]),
                float(row["last_seen_at"]),
            )
            for row in rows
        ),
    )


_BEAT = (
    # Purge the workers not seen since $5 (now) - $6 (seconds), then insert or refresh this
    # one ($1 id, $2 host, $3 pid, $4 started at); every part of a WITH runs.
    "WITH forgotten AS (DELETE FROM workers"
    " WHERE last_seen_at < $5::double precision - $6::double precision AND worker_id <> $1)"
    " INSERT INTO workers (worker_id, host, pid, started_at, last_seen_at)"
    " VALUES ($1, $2, $3, $4, $5)"
    " ON CONFLICT (worker_id) DO UPDATE SET last_seen_at = EXCLUDED.last_seen_at"
)
_SEEN = (
    # The window counts over every row before the limit applies.
    "SELECT worker_id, host, pid, started_at, last_seen_at,"
    " count(*) FILTER (WHERE last_seen_at >= $1) OVER () AS recent"
    " FROM workers ORDER BY last_seen_at DESC, worker_id LIMIT $2"
)
