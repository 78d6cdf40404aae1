"""Which Telegram message carries each conversation's latest round keyboard (table
`round_keyboards`), for `bot.transport.round_keyboards`.

Invariant: a conversation (bot, chat id, forum topic id or 0) has at most one row;
`swap_round_keyboard` replaces it (or deletes it, for None) and answers the message it
named before, in one statement (one round trip, atomic) that locks the row first, so two
workers' replies never both take the same keyboard away and none is forgotten. Two bots'
chat ids collide: a row is one bot's (`bot`, its scope).
"""

from __future__ import annotations

import asyncpg

SWAP = (
    "WITH before AS (SELECT message_id FROM round_keyboards"
    " WHERE bot = $4 AND chat_id = $1 AND thread_id = $2 FOR UPDATE),"
    " put AS (INSERT INTO round_keyboards (bot, chat_id, thread_id, message_id)"
    " SELECT $4, $1, $2, $3 WHERE $3::bigint IS NOT NULL"
    " ON CONFLICT (bot, chat_id, thread_id) DO UPDATE SET message_id = excluded.message_id),"
    " dropped AS (DELETE FROM round_keyboards"
    " WHERE bot = $4 AND chat_id = $1 AND thread_id = $2 AND $3::bigint IS NULL)"
    " SELECT message_id FROM before"
)
"""$1 chat id, $2 topic id (0: none), $3 the new message (NULL: none), $4 the bot: the old
message."""


async def swap_round_keyboard(
    connection: asyncpg.Connection,
    chat_id: int,
    thread_id: int | None,
    message_id: int | None,
    bot: int = 0,
) -> int | None:
    """Make `message_id` the conversation's keyboard message (None: it has none now); the
    one it had before, if any."""
    before = await connection.fetchval(SWAP, chat_id, thread_id or 0, message_id, bot)
    return None if before is None else int(before)


async def forget_round_keyboards(connection: asyncpg.Connection, chat_id: int, bot: int = 0) -> int:
    """Drop the rows of every conversation of the bot's chat; how many went."""
    gone = await connection.fetch(
        "DELETE FROM round_keyboards WHERE bot = $1 AND chat_id = $2 RETURNING 1", bot, chat_id
    )
    return len(gone)
