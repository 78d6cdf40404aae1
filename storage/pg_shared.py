"""State every worker process must share, on PostgreSQL: one class per concern.

- `PostgresRateLimits`: a per-user rate limit (a token bucket per user, one statement
  per check), so a user writing to several workers is limited once, not once per worker;
  messages (`rate_limits`) and button presses (`press_limits`) have a table each.
- `PostgresUndelivered`: replies stored but not delivered, by conversation, so whichever
  worker handles the chat's next turn (or a restarted one) sends them first.
- `PostgresFloodWaits`: Telegram's RetryAfter per chat, so no worker sends to a chat that
  Telegram told another worker to leave alone; read through a cache refreshed at most every
  `FLOOD_REFRESH_SECONDS`.
- `try_exclusive(pool, name)`: one runner at a time for a periodic job (the cleanup).

Invariants: every statement is parameterised (a rate limit's table name is one of
`RATE_TABLES`, never data); times are wall-clock seconds since the epoch
(`time.time`), the only clock several processes share; a lost connection or an unreachable
database reaches callers as `StoreUnavailable`. The tables come from the store's migrations
(`storage.pg_schema`, m004), applied by `open_shared_pool` too, so the order of opening the
store and these does not matter.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Literal, TypeVar

import asyncpg

from core.errors import StoreUnavailable
from storage.pg_batch import Batched
from storage.pg_locks import lock_id
from storage.pg_pool import call, is_unavailable, open_pool, unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]
RateTable = Literal["rate_limits", "press_limits"]
RATE_TABLES: tuple[RateTable, ...] = ("rate_limits", "press_limits")
"""Messages and button presses: one budget each, the same columns."""

RATE_WINDOW = 60.0
UNDELIVERED_KEEP = 24 * 3600.0
"""A reply not delivered within a day is dropped (it stays in the consultation's history)."""
FLOOD_REFRESH_SECONDS = 0.5
"""How stale a worker's view of the other workers' flood waits may be."""


async def open_shared_pool(url: str, *, size: int = 5) -> asyncpg.Pool:
    """A small pool for the shared state; applies missing migrations like the store does.

    Losing the last writes of this state in a database crash is harmless (a limit or a
    pause a little short; an undelivered reply is still in the history), so its commits
    do not wait for the disk.
    """
    return await open_pool(
        url,
        size=size,
        purpose="shared state",
        migrated=True,
        server_settings={"synchronous_commit": "off"},
    )


async def _call(pool: asyncpg.Pool, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
    return await call(pool, work)


# -- rate limits ----------------------------------------------------------------------------

# $1 user, $2 capacity, $3 now, $4 refill per second. The CTE takes a token when the refilled
# bucket holds one (and returns a row); a refusal changes nothing, and the outer SELECT reads
# the bucket from the statement's snapshot to say how long until the next token.
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
        clock: Clock = time.time,
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
        row = await _call(
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
        value = await _call(
            self._pool, lambda c: c.fetchval(self._warn, user_id, limit, now, RATE_WINDOW)
        )
        return value is not None

    async def forget_idle(self) -> int:
        """Delete the rows of users whose bucket is full again and who were not warned in
        the last minute (they behave exactly like users never seen); returns how many."""
        now = self._clock()
        status = await _call(
            self._pool,
            lambda c: c.execute(
                f"DELETE FROM {self._table} WHERE updated_at <= $1"
                " AND (warned_at IS NULL OR warned_at <= $2)",
                now - RATE_WINDOW,
                now - RATE_WINDOW,
            ),
        )
        return int(status.rsplit(" ", 1)[-1])


# -- undelivered replies --------------------------------------------------------------------


class PostgresUndelivered:
    """A reply document (JSON text, written by the bot) and its language per conversation.

    `thread_id` None (no forum topic) is stored as 0, which Telegram never uses for a topic.
    A later `put` for the same conversation replaces the earlier one; `pop` takes it away
    atomically, so two workers never both deliver it.
    """

    def __init__(self, pool: asyncpg.Pool, *, clock: Clock = time.time) -> None:
        self._pool = pool
        self._clock = clock
        # Every turn looks first: the looks made meanwhile share one statement.
        self._pops: Batched[tuple[int, int], asyncpg.Record | None] = Batched(self._pop_batch)

    async def put(self, chat_id: int, thread_id: int | None, document: str, language: str) -> None:
        await _call(
            self._pool,
            lambda c: c.execute(
                "INSERT INTO undelivered (chat_id, thread_id, reply, language, created_at)"
                " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (chat_id, thread_id) DO UPDATE"
                " SET reply = EXCLUDED.reply, language = EXCLUDED.language,"
                " created_at = EXCLUDED.created_at",
                chat_id,
                thread_id or 0,
                document,
                language,
                self._clock(),
            ),
        )

    async def pop(self, chat_id: int, thread_id: int | None) -> tuple[str, str] | None:
        """The conversation's document and language, removed; None if none or older than
        `UNDELIVERED_KEEP`."""
        row = await self._pops((chat_id, thread_id or 0))
        if row is None or row["created_at"] <= self._clock() - UNDELIVERED_KEEP:
            return None
        return row["reply"], row["language"]

    async def _pop_batch(self, batch: Sequence[tuple[int, int]]) -> list[asyncpg.Record | None]:
        rows = await _call(
            self._pool,
            lambda c: c.fetch(
                "DELETE FROM undelivered u USING unnest($1::bigint[], $2::bigint[])"
                " AS wanted (chat_id, thread_id) WHERE u.chat_id = wanted.chat_id"
                " AND u.thread_id = wanted.thread_id"
                " RETURNING u.chat_id, u.thread_id, u.reply, u.language, u.created_at",
                [chat for chat, _ in batch],
                [thread for _, thread in batch],
            ),
        )
        taken = {(row["chat_id"], row["thread_id"]): row for row in rows}
        return [taken.pop(conversation, None) for conversation in batch]

    async def forget_old(self) -> int:
        """Delete documents older than `UNDELIVERED_KEEP`; returns how many."""
        status = await _call(
            self._pool,
            lambda c: c.execute(
                "DELETE FROM undelivered WHERE created_at <= $1", self._clock() - UNDELIVERED_KEEP
            ),
        )
        return int(status.rsplit(" ", 1)[-1])


# -- flood waits ----------------------------------------------------------------------------


class PostgresFloodWaits:
    """Per chat, the time before which no worker sends to it (Telegram's RetryAfter).

    Reads come from a per-process copy of the waits still running (`SELECT` of the rows
    whose `until` is ahead), refreshed at most every `refresh` seconds by the first send
    that finds it older, so most sends cost no query. Staleness bound: a wait recorded by
    another worker is seen here at most `refresh` seconds (plus one query) after it was
    written; a wait recorded here is seen here at once. When the database cannot be read,
    the last copy is used and the refresh is tried again after `refresh` seconds: flood
    control degrades to per-process, never blocks sending.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        refresh: float = FLOOD_REFRESH_SECONDS,
        clock: Clock = time.time,
    ) -> None:
        self._pool = pool
        self._refresh = refresh
        self._clock = clock
        self._until: dict[int, float] = {}
        self._read_at: float | None = None
        self._reading: asyncio.Lock = asyncio.Lock()

    async def pause(self, chat_id: int, seconds: float) -> None:
        """Record that `chat_id` may receive nothing for `seconds` from now (a later `until`
        already recorded is kept)."""
        until = self._clock() + seconds
        self._until[chat_id] = max(until, self._until.get(chat_id, 0.0))
        try:
            await _call(
                self._pool,
                lambda c: c.execute(
                    "INSERT INTO flood_waits AS f (chat_id, until) VALUES ($1, $2)"
                    " ON CONFLICT (chat_id) DO UPDATE SET until = GREATEST(f.until, $2)",
                    chat_id,
                    until,
                ),
            )
        except StoreUnavailable as error:
            log.warning("flood wait for chat %s kept in this process only: %s", chat_id, error)

    async def remaining(self, chat_id: int) -> float:
        """Seconds until `chat_id` may receive messages again (0: now)."""
        await self._fresh()
        until = self._until.get(chat_id)
        return 0.0 if until is None else max(until - self._clock(), 0.0)

    def tracked(self) -> int:
        """Chats with a wait in this process's copy."""
        return len(self._until)

    async def forget_past(self) -> int:
        """Delete the rows of waits that are over; returns how many."""
        status = await _call(
            self._pool,
            lambda c: c.execute("DELETE FROM flood_waits WHERE until <= $1", self._clock()),
        )
        return int(status.rsplit(" ", 1)[-1])

    async def _fresh(self) -> None:
        if not self._stale():
            return
        async with self._reading:  # concurrent sends wait for one query, not one each
            if not self._stale():
                return
            now = self._clock()
            self._read_at = now
            try:
                rows = await _call(
                    self._pool,
                    lambda c: c.fetch(
                        "SELECT chat_id, until FROM flood_waits WHERE until > $1", now
                    ),
                )
            except StoreUnavailable as error:
                log.warning("flood waits of other workers not read: %s", error)
                return
            mine = {chat: until for chat, until in self._until.items() if until > now}
            self._until = {row["chat_id"]: row["until"] for row in rows}
            for chat, until in mine.items():  # a pause recorded here while the query ran
                self._until[chat] = max(until, self._until.get(chat, 0.0))

    def _stale(self) -> bool:
        return self._read_at is None or self._clock() - self._read_at >= self._refresh


# -- one runner at a time -------------------------------------------------------------------


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
