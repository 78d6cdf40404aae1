"""The console's sign-in attempts per client address, shared by every worker, on PostgreSQL
(`PostgresSignIns`, the `core.domain.sign_in_limits.SignInLimits` of a deployment with
DATABASE_URL).

A sliding window log per address, as `admin.throttle.SignInThrottle` keeps in memory: a
row holds the times of the address's attempts of the last window, at most N of them.
Reserving is one statement, atomic under concurrency (the upsert holds the row's lock
while it counts), so parallel sign-ins on several workers never take more than N
attempts of one window between them. The row of the empty address counts the window's
failed sign-ins written to the audit log, the same way.

Invariants: every statement is parameterised; times are wall-clock seconds since the
epoch, the only clock several processes share; a lost connection or an unreachable
database reaches callers as `StoreUnavailable` (the sign-in fails: the console's store is
the same database). The table is the cluster's (`c003_admin_sign_ins`); rows of
addresses with no attempt in the last window are deleted, at most once a window per
process, through the index on `last_at`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import asyncpg

from core.domain.sign_in_limits import MAX_AUDITED, Reserved, SignInLimits
from storage.postgres.pool import call

# $1 address, $2 limit, $3 now, $4 window: under the limit the attempt is added (older
# times dropped) and the window's attempts counted; at the limit nothing changes. A refusal
# reads the oldest time inside the window from the statement's snapshot (as `rate_limits`).
_RESERVE = """
WITH counted AS (
    INSERT INTO admin_sign_ins AS s (address, hits, last_at) VALUES ($1, ARRAY[$3::float8], $3)
    ON CONFLICT (address) DO UPDATE
        SET hits = ARRAY(SELECT h FROM unnest(s.hits || $3::float8) AS h
                         WHERE h > $3 - $4 ORDER BY h),
            last_at = GREATEST(s.last_at, $3)
        WHERE (SELECT count(*) FROM unnest(s.hits) AS h WHERE h > $3 - $4) < $2
    RETURNING cardinality(s.hits) AS taken
)
SELECT (SELECT taken FROM counted) AS taken,
       (SELECT min(h) FROM admin_sign_ins AS s, unnest(s.hits) AS h
         WHERE s.address = $1 AND h > $3 - $4) AS oldest
"""

AUDITED = ""
"""The row counting the window's failed sign-ins written to the audit log (no client has
an empty address)."""

# $1 address, $2 the attempt's time: one occurrence of it leaves the row's times.
_RELEASE = """
UPDATE admin_sign_ins
   SET hits = hits[:array_position(hits, $2::float8) - 1]
              || hits[array_position(hits, $2::float8) + 1:]
 WHERE address = $1 AND array_position(hits, $2::float8) IS NOT NULL
"""


class PostgresSignIns(SignInLimits):
    """At most `limit` sign-in attempts per address in any `window` seconds, across all
    workers."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        limit: int,
        window: float,
        *,
        clock: Callable[[], float] = time.time,
        max_audited: int = MAX_AUDITED,
    ) -> None:
        self._pool = pool
        self._limit = limit
        self._window = window
        self._clock = clock
        self._max_audited = max_audited
        self._pruned_at: float | None = None

    async def reserve(self, address: str) -> Reserved:
        now = self._clock()
        if self._pruned_at is None or now - self._pruned_at >= self._window:
            self._pruned_at = now
            await self.forget_idle()
        taken, oldest = await self._take(address, self._limit, now)
        if taken is not None:
            return Reserved(now)
        return Reserved(None, max(oldest + self._window - now, 0.001))

    async def take_audit_slot(self) -> int | None:
        taken, _ = await self._take(AUDITED, self._max_audited, self._clock())
        return None if taken is None else self._max_audited - taken

    async def _take(self, address: str, limit: int, now: float) -> tuple[int | None, float]:
        """One of `address`'s `limit` attempts of the window: how many it has taken with
        this one (None: refused), and its oldest of the window (`now` when none)."""
        row = await call(
            self._pool,
            lambda c: c.fetchrow(_RESERVE, address, limit, now, self._window),
            "sign-in attempts",
        )
        oldest = now if row["oldest"] is None else float(row["oldest"])
        return (None if row["taken"] is None else int(row["taken"])), oldest

    async def release(self, address: str, at: float) -> None:
        await call(self._pool, lambda c: c.execute(_RELEASE, address, at), "sign-in attempts")

    async def forget_idle(self) -> int:
        """Delete the rows of addresses with no attempt in the last window (they behave
        exactly like addresses never seen); returns how many."""
        since = self._clock() - self._window
        status = await call(
            self._pool,
            lambda c: c.execute("DELETE FROM admin_sign_ins WHERE last_at <= $1", since),
            "sign-in attempts",
        )
        return int(status.rsplit(" ", 1)[-1])
