"""Which Telegram message carries each conversation's latest round keyboard (table
`round_keyboards`), for `bot.transport.round_keyboards`.

Invariant: a conversation (bot, chat id, forum topic id or 0) has at most one row;
`swap_round_keyboard` replaces it (or deletes it, for None) and answers the message it named
before, in one transaction, so two replies never both take the same keyboard away and none
is forgotten. Two bots' chat ids collide: a row is one bot's (`bot`, its scope).
"""

from __future__ import annotations

import sqlite3

_FIND = "SELECT message_id FROM round_keyboards WHERE bot = ? AND chat_id = ? AND thread_id = ?"
_PUT = (
    "INSERT INTO round_keyboards (bot, chat_id, thread_id, message_id) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (bot, chat_id, thread_id) DO UPDATE SET message_id = excluded.message_id"
)
_DROP = "DELETE FROM round_keyboards WHERE bot = ? AND chat_id = ? AND thread_id = ?"


def swap_round_keyboard(
    db: sqlite3.Connection,
    *,
    chat_id: int,
    thread_id: int | None,
    message_id: int | None,
    bot: int = 0,
) -> int | None:
    """Make `message_id` the conversation's keyboard message (None: it has none now); the
    one it had before, if any."""
    conversation = (bot, chat_id, thread_id or 0)
    row = db.execute(_FIND, conversation).fetchone()
    if message_id is None:
        db.execute(_DROP, conversation)
    else:
        db.execute(_PUT, (*conversation, message_id))
    return None if row is None else int(row[0])


def forget_round_keyboards(db: sqlite3.Connection, *, chat_id: int, bot: int = 0) -> int:
    """Drop the rows of every conversation of the bot's chat; how many went."""
    return db.execute(
        "DELETE FROM round_keyboards WHERE bot = ? AND chat_id = ?", (bot, chat_id)
    ).rowcount
