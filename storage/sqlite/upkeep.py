"""The SQLite store's upkeep writes: re-keying a chat, expiring and purging consultations,
and remembering the webhook's Telegram update ids.

Each function is synchronous and runs on the writer's thread inside the transaction
opened by `storage.sqlite.batch`, so all of a call's statements are committed together,
or none. Every value reaches SQLite as a bound parameter.
"""

from __future__ import annotations

import sqlite3

from storage.sqlite.erasure import scrub_search_index
from storage.sqlite.placeholders import sqlite_sql
from storage.statements.bot_scope import (
    FORGET_BOT_ROWS,
    FORGET_CONSULTATIONS,
    FORGET_KEYED,
    key_ranges,
)
from storage.statements.idempotency import PURGE_UNOPENED
from storage.statements.telegram_updates import DROP_FAR, DROP_OLD, KEEP_IDS, KEEP_SECONDS
from storage.statements.tool_usage import DELETE_CHAT_TOOL_CALLS, MOVE_CHAT_TOOL_CALLS
from storage.statements.upkeep import (
    ACTIVE_IN_CHAT,
    DELETE_CHAT_CONSULTATIONS,
    DELETE_CHAT_SETTINGS,
    EXPIRE_IDLE,
    PURGE_ENDED,
    RESET_ACTIVE_IN_CHAT,
)
from storage.statements.usage import MOVE_CHAT_USAGE, MOVE_CHAT_USAGE_DELETE

_ACTIVE_IN_CHAT = sqlite_sql(ACTIVE_IN_CHAT)
_RESET_ACTIVE_IN_CHAT = sqlite_sql(RESET_ACTIVE_IN_CHAT)
_DELETE_CHAT_SETTINGS = sqlite_sql(DELETE_CHAT_SETTINGS)
_DELETE_CHAT_CONSULTATIONS = sqlite_sql(DELETE_CHAT_CONSULTATIONS)
_EXPIRE_IDLE = sqlite_sql(EXPIRE_IDLE)
_PURGE_ENDED = sqlite_sql(PURGE_ENDED)
_PURGE_UNOPENED = sqlite_sql(PURGE_UNOPENED)
_MOVE_CHAT_USAGE = sqlite_sql(MOVE_CHAT_USAGE)
_MOVE_CHAT_USAGE_DELETE = sqlite_sql(MOVE_CHAT_USAGE_DELETE)
_MOVE_CHAT_TOOL_CALLS = sqlite_sql(MOVE_CHAT_TOOL_CALLS)
_DELETE_CHAT_TOOL_CALLS = sqlite_sql(DELETE_CHAT_TOOL_CALLS)
_DROP_OLD_UPDATES = sqlite_sql(DROP_OLD)
_DROP_FAR_UPDATES = sqlite_sql(DROP_FAR)
_FORGET_CONSULTATIONS = sqlite_sql(FORGET_CONSULTATIONS)
_FORGET_KEYED = tuple(sqlite_sql(statement) for statement in FORGET_KEYED)
_FORGET_BOT_ROWS = tuple(sqlite_sql(statement) for statement in FORGET_BOT_ROWS)

VACUUM_PAGES_PER_PURGE = 5000
"""At most this many pages (20 MB at 4 KiB) are freed per purge, about 150 ms of work."""


def move_chat(db: sqlite3.Connection, old_key: str, new_key: str) -> int:
    """Re-key a chat's consultations, settings, usage and tool calls; the new key's own data
    wins on conflict (the old key's active consultation is reset, ended at its last
    activity), and usage of the same day, model and kind (tool calls of the same day and
    tool) is added together."""
    if db.execute(_ACTIVE_IN_CHAT, (new_key,)).fetchone():
        db.execute(_RESET_ACTIVE_IN_CHAT, (old_key,))
    moved = db.execute(
        "UPDATE consultations SET chat_key = ? WHERE chat_key = ?", (new_key, old_key)
    ).rowcount
    db.execute(
        "UPDATE OR IGNORE chat_settings SET chat_key = ? WHERE chat_key = ?", (new_key, old_key)
    )
    db.execute(_DELETE_CHAT_SETTINGS, (old_key,))
    db.execute(_MOVE_CHAT_USAGE, (old_key, new_key))
    db.execute(_MOVE_CHAT_USAGE_DELETE, (old_key,))
    db.execute(_MOVE_CHAT_TOOL_CALLS, (old_key, new_key))
    db.execute(_DELETE_CHAT_TOOL_CALLS, (old_key,))
    return moved


def expire_idle(db: sqlite3.Connection, inactive_since: float, at: float) -> int:
    """Expire idle ACTIVE consultations, ended at `at`; their last activity is kept for
    retention."""
    cursor = db.execute(_EXPIRE_IDLE, (inactive_since, at))
    return cursor.rowcount


def purge(db: sqlite3.Connection, older_than: float) -> int:
    """Delete ended consultations last active before `older_than`, then free their pages."""
    # Messages go by ON DELETE CASCADE; rowcount counts consultations only.
    cursor = db.execute(_PURGE_ENDED, (older_than,))
    db.execute(_PURGE_UNOPENED, (older_than,))
    if cursor.rowcount:
        scrub_search_index(db)
    free_pages(db, VACUUM_PAGES_PER_PURGE)
    return cursor.rowcount


def forget_chat(db: sqlite3.Connection, chat_key: str) -> int:
    """Delete the chat's consultations (messages and idempotency keys go by ON DELETE
    CASCADE), its settings and its tool calls by day; how many consultations went. Their
    pages are given back like a purge's."""
    gone = db.execute(_DELETE_CHAT_CONSULTATIONS, (chat_key,)).rowcount
    db.execute(_DELETE_CHAT_SETTINGS, (chat_key,))
    db.execute(_DELETE_CHAT_TOOL_CALLS, (chat_key,))
    if gone:
        scrub_search_index(db)
    free_pages(db, VACUUM_PAGES_PER_PURGE)
    return gone


def forget_bot(db: sqlite3.Connection, scope: int) -> int:
    """Delete everything the bot of `scope` keeps: its consultations (messages and
    idempotency keys by ON DELETE CASCADE), the rows its chat and person keys (Telegram's
    and the API's, each starting with one of its `key_ranges`) name, and its rows keyed by
    Telegram's ids; how many consultations went. Their pages are given back like a
    purge's."""
    gone = 0
    for key_range in key_ranges(scope):
        gone += db.execute(_FORGET_CONSULTATIONS, (key_range,)).rowcount
        for statement in _FORGET_KEYED:
            db.execute(statement, (key_range,))
    for statement in _FORGET_BOT_ROWS:
        db.execute(statement, (scope,))
    if gone:
        scrub_search_index(db)
    free_pages(db, VACUUM_PAGES_PER_PURGE)
    return gone


def free_pages(db: sqlite3.Connection, limit: int) -> int:
    """Give up to `limit` free pages back to the file system; return how many.

    The file shrinks at the next checkpoint. A cap keeps one call short (~30 µs
    a page); what is left is freed by the next call.
    """
    pages = min(limit, db.execute("PRAGMA freelist_count").fetchone()[0])
    # The sqlite3 module steps this pragma once, and each step frees one page.
    for _ in range(pages):
        db.execute("PRAGMA incremental_vacuum")
    return pages


def remember_update(db: sqlite3.Connection, update_id: int, at: float, bot: int = 0) -> bool:
    """Record the bot's `update_id`; True if it was not recorded yet."""
    new = db.execute(
        "INSERT OR IGNORE INTO telegram_updates (bot, update_id, received_at) VALUES (?, ?, ?)",
        (bot, update_id, at),
    ).rowcount
    db.execute(_DROP_OLD_UPDATES, (at - KEEP_SECONDS,))
    db.execute(_DROP_FAR_UPDATES, (bot, update_id - KEEP_IDS))
    return new == 1
