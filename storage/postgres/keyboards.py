"""Which Telegram message carries each conversation's latest round keyboard (table
`round_keyboards`), for `bot.round_keyboards`.

Invariant: a conversation (chat id, forum topic id or 0) has at most one row;
`swap_round_keyboard` replaces it (or deletes it, for None) and answers the message it
named before, in one transaction holding the row's lock, so two workers' replies never
both take the same keyboard away and none is forgotten.
"""

from __future__ import annotations

import asyncpg

_FIND = "SELECT message_id FROM round_keyboards WHERE chat_id = $1 AND thread_id = $2 FOR UPDATE"
_PUT = (
    "INSERT INTO round_keyboards (chat_id, thread_id, message_id) VALUES ($1, $2, $3)"
    " ON CONFLICT (chat_id, thread_id) DO UPDATE SET message_id = excluded.message_id"
)
_DROP = "DELETE FROM round_keyboards WHERE chat_id = $1 AND thread_id = $2"


async def swap_round_keyboard(
    connection: asyncpg.Connection, chat_id: int, thread_id: int | None, message_id: int | None
) -> int | None:
    """Make `message_id` the conversation's keyboard message (None: it has none now); the
    one it had before, if any. Runs inside the caller's transaction."""
    conversation = (chat_id, thread_id or 0)
    before = await connection.fetchval(_FIND, *conversation)
    if message_id is None:
        await connection.execute(_DROP, *conversation)
    else:
        await connection.execute(_PUT, *conversation, message_id)
    return None if before is None else int(before)


async def forget_round_keyboards(connection: asyncpg.Connection, chat_id: int) -> int:
    """Drop the rows of every conversation of the chat; how many went."""
    gone = await connection.fetch(
        "DELETE FROM round_keyboards WHERE chat_id = $1 RETURNING 1", chat_id
    )
    return len(gone)
