"""Telegram's RetryAfter per chat, shared by every worker, on PostgreSQL (`PostgresFloodWaits`).

No worker sends to a chat that Telegram told another worker to leave alone. Reads go
through a cache refreshed at most every `FLOOD_REFRESH_SECONDS`.

Invariants: every statement is parameterised; times are wall-clock seconds since the
epoch (`time.time`), the only clock several processes share; a lost connection or an
unreachable database reaches callers as `StoreUnavailable`. The table is the
cluster's (`storage.postgres.cluster.schema`), whose migrations
`open_shared_pool` applies, so the order of opening the store and this does not matter.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import asyncpg

from core.domain.errors import StoreUnavailable
from storage.postgres.pool import call

log = logging.getLogger(__name__)

FLOOD_REFRESH_SECONDS = 0.5
"""How stale a worker's view of the other workers' flood waits may be."""


class PostgresFloodWaits:
    """Per chat of the bot of scope `bot`, the time before which no worker sends to it
    (Telegram's RetryAfter): another bot's chat of the same id is not held.

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
        clock: Callable[[], float] = time.time,
        bot: int = 0,
    ) -> None:
        self._bot = bot
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
            await call(
                self._pool,
                lambda c: c.execute(
                    "INSERT INTO flood_waits AS f (bot, chat_id, until) VALUES ($3, $1, $2)"
                    " ON CONFLICT (bot, chat_id) DO UPDATE SET until = GREATEST(f.until, $2)",
                    chat_id,
                    until,
                    self._bot,
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
        """Delete the rows of waits that are over, of every bot; returns how many."""
        status = await call(
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
                rows = await call(
                    self._pool,
                    lambda c: c.fetch(
                        "SELECT chat_id, until FROM flood_waits WHERE bot = $1 AND until > $2",
                        self._bot,
                        now,
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
