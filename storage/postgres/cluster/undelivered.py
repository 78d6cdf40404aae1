"""Replies stored but not delivered, by conversation, on PostgreSQL (`PostgresUndelivered`),
so whichever worker handles the chat's next turn (or a restarted one) sends them first.

Invariants: every statement is parameterised; times are wall-clock seconds since the
epoch (`time.time`), the only clock several processes share; a lost connection or an
unreachable database reaches callers as `StoreUnavailable`. The table is the
cluster's (`storage.postgres.cluster.schema`), whose migrations
`open_shared_pool` applies, so the order of opening the store and this does not matter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import asyncpg

from storage.postgres.batch import BatchedStatement
from storage.postgres.pool import call

UNDELIVERED_KEEP = 24 * 3600.0
"""A reply not delivered within a day is dropped (it stays in the consultation's history)."""


class PostgresUndelivered:
    """A reply document (JSON text, written by the bot) and its language per conversation.

    `thread_id` None (no forum topic) is stored as 0, which Telegram never uses for a topic.
    A row is the bot's of scope `bot`: two bots' chat ids collide.
    A later `put` for the same conversation replaces the earlier one; `pop` takes it away
    atomically, so two workers never both deliver it.
    """

    def __init__(
        self, pool: asyncpg.Pool, *, clock: Callable[[], float] = time.time, bot: int = 0
    ) -> None:
        self._bot = bot
        self._pool = pool
        self._clock = clock
        # Every turn looks first: the looks made meanwhile share one statement.
        self._pops: BatchedStatement[tuple[int, int], asyncpg.Record | None] = BatchedStatement(
            self._pop_batch
        )

    async def put(self, chat_id: int, thread_id: int | None, document: str, language: str) -> None:
        await call(
            self._pool,
            lambda c: c.execute(
                "INSERT INTO undelivered (bot, chat_id, thread_id, reply, language, created_at)"
                " VALUES ($6, $1, $2, $3, $4, $5) ON CONFLICT (bot, chat_id, thread_id) DO UPDATE"
                " SET reply = EXCLUDED.reply, language = EXCLUDED.language,"
                " created_at = EXCLUDED.created_at",
                chat_id,
                thread_id or 0,
                document,
                language,
                self._clock(),
                self._bot,
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
        rows = await call(
            self._pool,
            lambda c: c.fetch(
                "DELETE FROM undelivered u USING unnest($1::bigint[], $2::bigint[])"
                " AS wanted (chat_id, thread_id) WHERE u.bot = $3 AND u.chat_id = wanted.chat_id"
                " AND u.thread_id = wanted.thread_id"
                " RETURNING u.chat_id, u.thread_id, u.reply, u.language, u.created_at",
                [chat for chat, _ in batch],
                [thread for _, thread in batch],
                self._bot,
            ),
        )
        taken = {(row["chat_id"], row["thread_id"]): row for row in rows}
        return [taken.pop(conversation, None) for conversation in batch]

    async def forget_chat(self, chat_id: int) -> int:
        """Delete the documents of every conversation of the chat; how many went."""
        status = await call(
            self._pool,
            lambda c: c.execute(
                "DELETE FROM undelivered WHERE bot = $1 AND chat_id = $2", self._bot, chat_id
            ),
        )
        return int(status.rsplit(" ", 1)[-1])

    async def forget_old(self) -> int:
        """Delete documents older than `UNDELIVERED_KEEP`; returns how many."""
        status = await call(
            self._pool,
            lambda c: c.execute(
                "DELETE FROM undelivered WHERE created_at <= $1", self._clock() - UNDELIVERED_KEEP
            ),
        )
        return int(status.rsplit(" ", 1)[-1])
