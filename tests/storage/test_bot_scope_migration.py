"""Upgrading a database to m032 (each Telegram-level row's bot, in its key), on each store:
the rows stored before are the deployment's own bot's (scope 0) and read as before, and
another bot's rows of the same ids can be stored beside them."""

from __future__ import annotations

from pathlib import Path

import aiosqlite
import asyncpg

from storage.postgres import schema as postgres_schema
from storage.postgres.store import PostgresStore
from storage.sqlite import schema as sqlite_schema
from storage.sqlite.store import SqliteStore
from tests.postgres import postgres_url  # noqa: F401  (fixture)

MIGRATION = "m032_bot_scope"
AT = 1_795_694_400.0
OLD_ROWS = (
    "INSERT INTO telegram_updates (update_id, received_at) VALUES (7, $1)",
    "INSERT INTO round_keyboards (chat_id, thread_id, message_id) VALUES (5, 0, 9)",
)


async def reads_the_old_rows_as_the_deployments_bot(store: SqliteStore | PostgresStore) -> None:
    """Update 7 and chat 5's keyboard are scope 0's; bot 2 has neither."""
    assert not await store.remember_update(7, at=AT + 1)
    assert await store.remember_update(7, bot=2, at=AT + 1)
    assert await store.swap_round_keyboard(5, None, 10, bot=2) is None
    assert await store.swap_round_keyboard(5, None, 11) == 9


async def test_sqlite_rows_stored_before_are_the_deployments_bots(tmp_path: Path) -> None:
    """The rebuilt tables keep every row, as scope 0."""
    path = tmp_path / "old.sqlite3"
    before = [m for m in sqlite_schema.MIGRATIONS if m.__name__ < MIGRATION]
    async with aiosqlite.connect(path, isolation_level=None) as db:
        await sqlite_schema.migrate(db, before)
        for statement in OLD_ROWS:
            await db.execute(statement.replace("$1", "?"), (AT,) if "$1" in statement else ())
    store = await SqliteStore.open(path)
    try:
        await reads_the_old_rows_as_the_deployments_bot(store)
    finally:
        await store.close()
    async with aiosqlite.connect(path) as db:
        assert list(await db.execute_fetchall("PRAGMA quick_check")) == [("ok",)]
        rows = await db.execute_fetchall("SELECT bot, update_id FROM telegram_updates ORDER BY 1")
        assert list(rows) == [(0, 7), (2, 7)]


async def test_postgres_rows_stored_before_are_the_deployments_bots(
    postgres_url: str,  # noqa: F811
) -> None:
    """Every table m032 keys by bot keeps its rows, as scope 0, the cluster's too."""
    connection = await asyncpg.connect(postgres_url)
    try:
        before = [m for m in postgres_schema.MIGRATIONS if m[0] < MIGRATION]
        await postgres_schema.apply_migrations(connection, before)
        await connection.execute(OLD_ROWS[0], AT)
        await connection.execute(OLD_ROWS[1])
        await connection.execute(
            "INSERT INTO inbox (update_id, chat_key, payload, received_at)"
            " VALUES (8, 'tg:1', '{}', 1)"
        )
        await connection.execute(
            "INSERT INTO dead_letters (update_id, chat_key, payload, attempts, reason,"
            " received_at, dead_at) VALUES (6, 'tg:1', '{}', 1, 'error', 1, 2)"
        )
    finally:
        await connection.close()
    store = await PostgresStore.open(postgres_url)
    try:
        await reads_the_old_rows_as_the_deployments_bot(store)
    finally:
        await store.close()
    connection = await asyncpg.connect(postgres_url)
    try:
        for table in ("inbox", "dead_letters"):
            assert await connection.fetchval(f"SELECT array_agg(bot) FROM {table}") == [0], table
        keyboards = await connection.fetch("SELECT bot, message_id FROM round_keyboards ORDER BY 1")
        assert [tuple(row) for row in keyboards] == [(0, 11), (2, 10)]
    finally:
        await connection.close()
