"""A per-user rate limit every worker process shares, on PostgreSQL (`PostgresRateLimits`).

A sliding window log per bot and user, one statement per check, so a user writing to
several workers is limited once, not once per worker, and a user's messages to one bot never
spend their budget in another; messages (`bot_rate_limits`) and button presses
(`bot_press_limits`) have a table each, keyed by (bot, user_id) (c004). A table's name is one
of `RATE_TABLES` or `LEGACY_RATE_TABLES`, never data.

Invariants: every statement is parameterised; times are wall-clock seconds since the
epoch (`time.time`), the only clock several processes share; a lost connection or an
unreachable database reaches callers as `StoreUnavailable`. The table is the
cluster's (`storage.postgres.cluster.schema`), whose migrations
`open_shared_pool` applies, so the order of opening the store and this does not matter.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import asyncpg

from core.primitives.rate_window import WINDOW_SECONDS
from storage.postgres.pool import call

RateTable = Literal["bot_rate_limits", "bot_press_limits"]

RATE_TABLES: tuple[RateTable, ...] = ("bot_rate_limits", "bot_press_limits")
"""Messages and button presses: one budget each per bot, the same columns."""

LEGACY_RATE_TABLES = ("rate_limits", "press_limits")
"""The budgets keyed by user alone, before c004: only workers of the release before it
count in them (during a rolling restart); this release only deletes their idle rows, so
they empty themselves a minute after the last of those workers stopped."""

# $1 user, $2 limit, $3 now, $4 window, $5 bot. The upsert locks the user's row (a first check
# inserts it; a concurrent one waits on it and then updates the row it made) and counts the
# latest version's times inside the window: under the limit it keeps those and adds now,
# and returns a row; at the limit it changes nothing. A refusal reads the oldest time inside
# the window from the statement's snapshot: the times added since are all later, so it is the
# oldest of the latest version too, unless there was none (then they are all about now).
_COUNT = """
WITH counted AS (
    INSERT INTO {table} AS r (bot, user_id, hits)
    VALUES ($5::bigint, $1::bigint, ARRAY[$3::float8])
    ON CONFLICT (bot, user_id) DO UPDATE
        SET hits = ARRAY(SELECT h FROM unnest(r.hits || $3::float8) AS h
                         WHERE h > $3 - $4 ORDER BY h)
        WHERE (SELECT count(*) FROM unnest(r.hits) AS h WHERE h > $3 - $4) < $2
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM counted) AS allowed,
       (SELECT min(h) FROM {table} AS r, unnest(r.hits) AS h
         WHERE r.bot = $5 AND r.user_id = $1 AND h > $3 - $4) AS oldest
"""

# $1 user, $2 now, $3 window, $4 bot.
_WARN = """
INSERT INTO {table} AS r (bot, user_id, warned_at) VALUES ($4::bigint, $1::bigint, $2::float8)
ON CONFLICT (bot, user_id) DO UPDATE SET warned_at = $2::float8
    WHERE r.warned_at IS NULL OR r.warned_at <= $2::float8 - $3::float8
RETURNING 1
"""


class PostgresRateLimits:
    """At most `per_minute` events per user of the bot of scope `bot` (0: the deployment's
    own) in any 60-second window across all workers (0: unlimited), counted in `table`:
    messages (`bot_rate_limits`) or button presses (`bot_press_limits`) — the same meaning
    as `bot.updates.access.RateLimiter` in memory, one per bot's Application.

    A sliding window log: a user's row holds the times of their events of the last
    window, at most `per_minute` of them (older ones are dropped by the check that finds
    them), so storage per user is bounded. Each `check` is one statement, atomic under
    concurrency (the upsert holds the row's lock while it counts), so two workers never
    both count the last event the window allows.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        per_minute: int,
        *,
        table: RateTable = "bot_rate_limits",
        bot: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if table not in RATE_TABLES:
            raise ValueError(f"not a rate limit table: {table!r}")
        self._pool = pool
        self._limit = per_minute
        self._clock = clock
        self._table = table
        self._bot = bot
        self._count = _COUNT.format(table=table)
        self._warn = _WARN.format(table=table)

    async def check(self, user_id: int) -> float:
        """Count an event: 0 when allowed, else the seconds until the window has room
        (nothing counted)."""
        if self._limit <= 0:
            return 0.0
        now = self._clock()
        row = await call(
            self._pool,
            lambda c: c.fetchrow(self._count, user_id, self._limit, now, WINDOW_SECONDS, self._bot),
        )
        if row["allowed"]:
            return 0.0
        oldest = now if row["oldest"] is None else row["oldest"]
        return max(WINDOW_SECONDS - (now - oldest), 0.001)

    async def should_warn(self, user_id: int) -> bool:
        """True at most once per minute per user, whichever worker asks."""
        now = self._clock()
        value = await call(
            self._pool,
            lambda c: c.fetchval(self._warn, user_id, now, WINDOW_SECONDS, self._bot),
        )
        return value is not None

    async def forget_idle(self) -> int:
        """Delete the rows of users with no event and no warning in the last window, every
        bot's (they behave exactly like users never seen); returns how many."""
        return await forget_idle(self._pool, self._table, self._clock())


async def forget_idle(pool: asyncpg.Pool, table: str, now: float) -> int:
    """Delete `table`'s rows (one of `RATE_TABLES` or `LEGACY_RATE_TABLES`) with no event
    and no warning in the window before `now`; returns how many."""
    if table not in RATE_TABLES + LEGACY_RATE_TABLES:
        raise ValueError(f"not a rate limit table: {table!r}")
    since = now - WINDOW_SECONDS
    status = await call(
        pool,
        lambda c: c.execute(
            f"DELETE FROM {table} AS r"
            " WHERE NOT EXISTS (SELECT 1 FROM unnest(r.hits) AS h WHERE h > $1)"
            " AND (r.warned_at IS NULL OR r.warned_at <= $1)",
            since,
        ),
    )
    return int(status.rsplit(" ", 1)[-1])
