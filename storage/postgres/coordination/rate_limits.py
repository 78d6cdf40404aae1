"""A per-user rate limit every worker process shares, on PostgreSQL (`PostgresRateLimits`).

A token bucket per user, one statement per check, so a user writing to several workers is
limited once, not once per worker; messages (`rate_limits`) and button presses
(`press_limits`) have a table each. A table's name is one of `RATE_TABLES`, never data.

Invariants: every statement is parameterised; times are wall-clock seconds since the
epoch (`time.time`), the only clock several processes share; a lost connection or an
unreachable database reaches callers as `StoreUnavailable`. The table is the
coordination's (`storage.postgres.coordination.schema`), whose migrations
`open_shared_pool` applies, so the order of opening the store and this does not matter.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import asyncpg

from storage.postgres.pool import call

# $1 user, $2 capacity, $3 now, $4 refill per second. The CTE takes a token when the refilled
# bucket holds one (and returns a row); a refusal changes nothing, and the outer SELECT reads
# the bucket from the statement's snapshot to say how long until the next token.
RateTable = Literal["rate_limits", "press_limits"]

RATE_TABLES: tuple[RateTable, ...] = ("rate_limits", "press_limits")
"""Messages and button presses: one budget each, the same columns."""

RATE_WINDOW = 60.0

_TAKE_TOKEN = """
WITH taken AS (
    INSERT INTO {table} AS r (user_id, tokens, updated_at)
    VALUES ($1::bigint, $2::float8 - 1, $3::float8)
    ON CONFLICT (user_id) DO UPDATE
        SET tokens = LEAST($2, r.tokens + GREATEST($3 - r.updated_at, 0) * $4) - 1,
            updated_at = GREATEST($3, r.updated_at)
        WHERE LEAST($2, r.tokens + GREATEST($3 - r.updated_at, 0) * $4) >= 1
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM taken) AS allowed,
       (SELECT LEAST($2, tokens + GREATEST($3 - updated_at, 0) * $4)
          FROM {table} WHERE user_id = $1) AS refilled
"""

_WARN = """
INSERT INTO {table} AS r (user_id, tokens, updated_at, warned_at)
VALUES ($1::bigint, $2::float8, $3::float8, $3::float8)
ON CONFLICT (user_id) DO UPDATE SET warned_at = $3::float8
    WHERE r.warned_at IS NULL OR r.warned_at <= $3::float8 - $4::float8
RETURNING 1
"""


class PostgresRateLimits:
    """At most `per_minute` events a minute per user across all workers (0: unlimited),
    counted in `table`: messages (`rate_limits`) or button presses (`press_limits`).

    A token bucket: `per_minute` tokens, refilled evenly over a minute; each allowed
    event takes one. A burst of `per_minute` passes, then one event every
    `60 / per_minute` seconds. Each `check` is one statement, atomic under concurrency
    (the row is locked by the upsert), so two workers never both take the last token.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        per_minute: int,
        *,
        table: RateTable = "rate_limits",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if table not in RATE_TABLES:
            raise ValueError(f"not a rate limit table: {table!r}")
        self._pool = pool
        self._limit = per_minute
        self._clock = clock
        self._table = table
        self._take = _TAKE_TOKEN.format(table=table)
        self._warn = _WARN.format(table=table)

    async def check(self, user_id: int) -> float:
        """Take a token: 0 when allowed, else the seconds until one is available."""
        if self._limit <= 0:
            return 0.0
        rate = self._limit / RATE_WINDOW
        row = await call(
            self._pool,
            lambda c: c.fetchrow(self._take, user_id, float(self._limit), self._clock(), rate),
        )
        if row["allowed"]:
            return 0.0
        refilled = row["refilled"]
        missing = 1.0 if refilled is None else max(1.0 - refilled, 0.0)
        return max(missing / rate, 0.001)

    async def should_warn(self, user_id: int) -> bool:
        """True at most once per minute per user, whichever worker asks."""
        limit, now = float(self._limit), self._clock()
        value = await call(
            self._pool, lambda c: c.fetchval(self._warn, user_id, limit, now, RATE_WINDOW)
        )
        return value is not None

    async def forget_idle(self) -> int:
        """Delete the rows of users whose bucket is full again and who were not warned in
        the last minute (they behave exactly like users never seen); returns how many."""
        now = self._clock()
        status = await call(
            self._pool,
            lambda c: c.execute(
                f"DELETE FROM {self._table} WHERE updated_at <= $1"
                " AND (warned_at IS NULL OR warned_at <= $2)",
                now - RATE_WINDOW,
                now - RATE_WINDOW,
            ),
        )
        return int(status.rsplit(" ", 1)[-1])
