"""The dead letters on PostgreSQL: updates the inbox gave up, for an operator to read,
replay or drop (`consultation-bot dead-letters`).

Invariants:
- A letter is moved, never copied: `replay` deletes it and queues its update in the inbox
  (attempts back to 0, announced to the workers like a new row) in one statement, so
  an update is in one of the two tables at a time; an update already waiting in the inbox
  is left there and its letter kept.
- `drop` deletes a letter for good; its update id stays recorded, so Telegram's
  redelivery of it is still refused.
- A letter is one bot's (`bot`, its scope): `replay` and `drop` name the bot and the
  update id (two bots' ids collide), and a replayed letter goes back to its own bot's
  inbox, never another's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import asyncpg

from storage.postgres.cluster.inbox import channel_of


@dataclass(frozen=True, slots=True)
class DeadLetter:
    update_id: int
    chat_key: str
    payload: str
    attempts: int  # handlings started before it was given up
    reason: str  # "attempts", "deadline" or "error"
    received_at: float  # epoch seconds
    dead_at: float
    bot: int = 0  # the scope of the bot it came to (`core.domain.telegram_keys`)


async def dead_letters(
    connection: asyncpg.Connection, limit: int = 100, *, bot: int | None = None
) -> list[DeadLetter]:
    """The most recently given up first: every bot's, or the bot's of scope `bot`."""
    rows = await connection.fetch(
        "SELECT update_id, chat_key, payload, attempts, reason, received_at, dead_at, bot"
        " FROM dead_letters WHERE $2::bigint IS NULL OR bot = $2"
        " ORDER BY dead_at DESC, update_id DESC LIMIT $1",
        limit,
        bot,
    )
    return [
        DeadLetter(
            int(row["update_id"]),
            str(row["chat_key"]),
            str(row["payload"]),
            int(row["attempts"]),
            str(row["reason"]),
            float(row["received_at"]),
            float(row["dead_at"]),
            int(row["bot"]),
        )
        for row in rows
    ]


async def count_letters(connection: asyncpg.Connection, bound: int = 10_000) -> int:
    """The letters kept, counted up to `bound` + 1 (one statement reading at most that many
    rows): more than `bound` means at least that many."""
    found = await connection.fetchval(
        "SELECT count(*) FROM (SELECT 1 FROM dead_letters LIMIT $1) AS letters", bound + 1
    )
    return int(found)


async def replay(connection: asyncpg.Connection, update_id: int, bot: int = 0) -> bool:
    """Queue the bot's letter's update in its inbox again; False when there is no such
    letter (or its update is waiting in the inbox already)."""
    schema = str(await connection.fetchval("SELECT current_schema()"))
    channel = channel_of(schema, bot=bot)
    queued = await connection.fetchrow(_REPLAY, update_id, time.time(), channel, bot)
    return queued is not None


async def drop(connection: asyncpg.Connection, update_id: int, bot: int = 0) -> bool:
    """Delete the bot's letter; False when there was none."""
    gone = await connection.fetchval(
        "DELETE FROM dead_letters WHERE bot = $2 AND update_id = $1 RETURNING update_id",
        update_id,
        bot,
    )
    return gone is not None


_REPLAY = (
    # Delete the letter ($1) unless its id waits in the inbox, queue it anew ($2 now,
    # attempts 0) and announce the row on the inbox channel ($3) at commit; the bot's ($4).
    "WITH gone AS (DELETE FROM dead_letters WHERE bot = $4 AND update_id = $1"
    " AND NOT EXISTS (SELECT 1 FROM inbox WHERE bot = $4 AND update_id = $1)"
    " RETURNING bot, update_id, chat_key, payload),"
    " queued AS (INSERT INTO inbox (bot, update_id, chat_key, payload, received_at, attempts)"
    " SELECT bot, update_id, chat_key, payload, $2, 0 FROM gone RETURNING chat_key)"
    " SELECT chat_key, pg_notify($3, chat_key) FROM queued"
)
