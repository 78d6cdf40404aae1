"""This bot worker in the PostgreSQL worker registry (`storage.postgres.cluster.workers`),
so that the operator's console can say which workers are up.

Invariants: the beat is a supervised loop (`telemetry.supervision`): a beat that fails (the
database briefly unavailable) is logged and tried again sooner, never ending the loop; a
worker that stops cleanly deletes its row (`leave`), and one that could not ages out (its
last beat shown, its row purged after `FORGET_AFTER`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import asyncpg

from storage.postgres.cluster import workers
from storage.postgres.cluster.workers import Worker
from storage.postgres.pool import call
from telemetry.supervision import LoopRegistry, Pace, supervise

log = logging.getLogger(__name__)

BEAT_SECONDS = 15.0
BEAT_LONGEST = 30.0  # one beat (one statement) taking longer is stuck
WHAT = "worker registry"


async def heartbeat(
    pool: asyncpg.Pool,
    worker: Worker,
    loops: LoopRegistry,
    *,
    interval: float = BEAT_SECONDS,
    clock: Callable[[], float] = time.time,
) -> None:
    """Record `worker` as seen now, then every `interval` seconds, until cancelled."""

    async def once() -> None:
        at = clock()
        await call(pool, lambda c: workers.beat(c, worker, at), WHAT)

    pace = Pace(interval, BEAT_LONGEST, first_retry=min(1.0, interval), max_retry=interval)
    await supervise("heartbeat", once, pace, loops)


async def leave(pool: asyncpg.Pool, worker: Worker) -> None:
    """Delete the worker's row; a failure is logged only (the row then ages out)."""
    try:
        await call(pool, lambda c: workers.leave(c, worker.worker_id), WHAT)
    except Exception as exc:
        log.warning("worker registry: could not remove this worker's row: %s", exc)
