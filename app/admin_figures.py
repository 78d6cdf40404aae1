"""The console's figures of a PostgreSQL deployment (`admin.dashboard.FigureSource`): the
bot workers seen and the shared inbox, read from the shared-state pool the process already
holds (`Runtime.shared_pool`).

Invariants: one connection of that pool per view and three statements on it, each bounded
whatever the tables hold (the workers' rows are a handful; the inbox and the dead letters
are counted up to `BOUND`, shown as "10,000+" beyond); ages are on the console's clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import asyncpg

from admin.dashboard import Figure, FigureSection, FigureTable
from storage.postgres.cluster import dead_letters, inbox, workers
from storage.postgres.pool import call

RECENT_SECONDS = 60.0  # a worker whose last beat is this recent counts as up
BOUND = 10_000
LISTED = 50


class PostgresFigures:
    title = "Workers and inbox"

    def __init__(self, pool: asyncpg.Pool, clock: Callable[[], float] = time.time) -> None:
        self._pool = pool
        self._clock = clock

    async def sections(self) -> Sequence[FigureSection]:
        now = self._clock()

        async def read(
            connection: asyncpg.Connection,
        ) -> tuple[workers.Seen, inbox.Backlog, int]:
            return (
                await workers.seen(connection, now - RECENT_SECONDS, LISTED),
                await inbox.backlog(connection, BOUND),
                await dead_letters.count_letters(connection, BOUND),
            )

        seen, waiting, letters = await call(self._pool, read, "console figures")
        oldest = waiting.oldest_received_at
        figures = (
            Figure("workers seen", f"{seen.recent:,}", f"in the last {RECENT_SECONDS:.0f} s"),
            Figure(
                "updates waiting",
                _bounded(waiting.waiting, waiting.more),
                "accepted, not handled yet",
            ),
            Figure(
                "oldest waiting",
                "—" if oldest is None else age(now - oldest),
                "of the first 10,000 counted" if waiting.more else "",
            ),
            Figure("dead letters", _bounded(letters, letters > BOUND), "given up, kept"),
        )
        table = FigureTable(
            "Workers",
            ("Host", "PID", "Started", "Last seen"),
            tuple(
                (w.host, str(w.pid), _moment(w.started_at), f"{age(now - w.last_seen_at)} ago")
                for w in seen.workers
            ),
            empty="No worker seen in the last day.",
        )
        note = (
            "Each bot worker records itself every 15 s and removes itself when it stops;"
            " one not seen for a day is forgotten."
        )
        return (FigureSection(self.title, figures, (table,), note),)


def age(seconds: float) -> str:
    """A duration as the console shows an age: seconds, minutes, hours or days."""
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:.1f} d"


def _bounded(count: int, more: bool) -> str:
    return f"{min(count, BOUND):,}+" if more else f"{count:,}"


def _moment(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
