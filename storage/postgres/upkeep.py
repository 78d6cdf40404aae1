"""The PostgreSQL store's upkeep writes: re-keying a chat, expiring and purging
consultations, and remembering the webhook's Telegram update ids.

Each function is given a connection inside the transaction the store opened for the
call (`PostgresStore` owns transactions and the order of writes), so all of a call's
statements are committed together, or none.

Invariants:
- Every statement is parameterised.
- `move_chat`: the new key's own data wins. Its ACTIVE consultation stays the only
  ACTIVE one (the old key's is reset first: at most one ACTIVE per chat key), and its
  settings are kept (the old key's are dropped).
- `expire_idle` leaves the last activity as it was: retention counts from the last real
  activity, not from the expiry.
- `purge` deletes only ended consultations; their messages and idempotency keys go with
  them (`ON DELETE CASCADE`), chat settings stay.
- `remember_update` answers "new" once per update id and keeps ids within the bounds of
  `storage.statements.telegram_updates` (`KEEP_SECONDS`, `KEEP_IDS`).
"""

from __future__ import annotations

from typing import Any

import asyncpg

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


async def move_chat(connection: asyncpg.Connection, old_key: str, new_key: str) -> int:
    """Re-key a chat's consultations, settings, usage and tool calls (added to the new
    key's of the same day, model and kind, or day and tool); the number of consultations
    moved."""
    if await connection.fetchval(ACTIVE_IN_CHAT, new_key):
        await connection.execute(RESET_ACTIVE_IN_CHAT, old_key)
    moved = await connection.fetchval(
        "WITH moved AS (UPDATE consultations SET chat_key = $1 WHERE chat_key = $2"
        " RETURNING 1) SELECT count(*) FROM moved",
        new_key,
        old_key,
    )
    await connection.execute(
        "UPDATE chat_settings SET chat_key = $1 WHERE chat_key = $2 AND NOT EXISTS"
        " (SELECT 1 FROM chat_settings WHERE chat_key = $1)",
        new_key,
        old_key,
    )
    await connection.execute(DELETE_CHAT_SETTINGS, old_key)
    await connection.execute(MOVE_CHAT_USAGE, old_key, new_key)
    await connection.execute(MOVE_CHAT_USAGE_DELETE, old_key)
    await connection.execute(MOVE_CHAT_TOOL_CALLS, old_key, new_key)
    await connection.execute(DELETE_CHAT_TOOL_CALLS, old_key)
    return int(moved)


async def expire_idle(connection: asyncpg.Connection, inactive_since: float, at: float) -> int:
    """Expire the ACTIVE consultations last active before `inactive_since`, ended at `at`;
    how many."""
    return await _count(connection, EXPIRE_IDLE, inactive_since, at)


async def purge(connection: asyncpg.Connection, older_than: float) -> int:
    """Delete the ended consultations last active before `older_than`; how many. Claims of
    idempotency keys never given a session (their holder died) go too."""
    await connection.execute(PURGE_UNOPENED, older_than)
    return await _count(connection, PURGE_ENDED, older_than)


async def forget_chat(connection: asyncpg.Connection, chat_key: str) -> int:
    """Delete the chat's consultations (messages and idempotency keys go by ON DELETE
    CASCADE), its settings and its tool calls by day; how many consultations went."""
    gone = await _count(connection, DELETE_CHAT_CONSULTATIONS, chat_key)
    await connection.execute(DELETE_CHAT_SETTINGS, chat_key)
    await connection.execute(DELETE_CHAT_TOOL_CALLS, chat_key)
    return gone


CLUSTER_BOT_ROWS = ("inbox", "dead_letters", "undelivered", "flood_waits")
"""The cluster's tables with a bot's rows in `bot` (m032). The per-user limits per bot
(c004) are not among them: their rows go by themselves a minute after their last event (the
cleanup's `forget_idle`), and a store opened without the cluster's migrations lacks them."""


async def forget_bot(connection: asyncpg.Connection, scope: int) -> int:
    """Delete everything the bot of `scope` keeps: its consultations (messages and
    idempotency keys with them), the rows its chat and person keys (Telegram's and the
    API's, each starting with one of its `key_ranges`) name, and its rows keyed by
    Telegram's ids, the cluster's too (the updates waiting and given up, replies not
    delivered, flood waits); how many consultations went."""
    gone = 0
    for key_range in key_ranges(scope):
        gone += await _count(connection, FORGET_CONSULTATIONS, key_range)
        for statement in FORGET_KEYED:
            await connection.execute(statement, key_range)
    for statement in FORGET_BOT_ROWS:
        await connection.execute(statement, scope)
    for table in CLUSTER_BOT_ROWS:
        await connection.execute(f"DELETE FROM {table} WHERE bot = $1", scope)
    return gone


async def remember_update(
    connection: asyncpg.Connection, update_id: int, received: float, bot: int = 0
) -> bool:
    """Record the bot's `update_id`; True if it was not recorded yet. Drops ids out of
    both bounds."""
    new = await connection.fetchval(
        "INSERT INTO telegram_updates (bot, update_id, received_at) VALUES ($1, $2, $3)"
        " ON CONFLICT (bot, update_id) DO NOTHING RETURNING 1",
        bot,
        update_id,
        received,
    )
    await connection.execute(DROP_OLD, received - KEEP_SECONDS)
    await connection.execute(DROP_FAR, bot, update_id - KEEP_IDS)
    return new is not None


async def _count(connection: asyncpg.Connection, statement: str, *args: Any) -> int:
    """Run `statement`; the number of rows it touched (from the command tag)."""
    status = await connection.execute(statement, *args)
    return int(status.rsplit(" ", 1)[-1])
