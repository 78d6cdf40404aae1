"""Both backends keep one schema: each is created from scratch by its own migrations and
read back from the database's catalogue, then compared table by table: columns (type
family and nullability), primary key, unique constraints, indexes and foreign keys. A
migration added to one backend only fails here. PostgreSQL has the workers'
cluster tables besides (`storage.postgres.cluster.schema.TABLES`), and nothing
else. Text-search indexes take a different form on each backend (an FTS5 table and its
shadow tables on SQLite, a GIN index on PostgreSQL, over a stored tsvector column there)
and are compared apart: by name, the table they index and the columns they read."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import aiosqlite
import asyncpg
import pytest

from storage.postgres import schema as postgres_schema
from storage.postgres.cluster import schema as cluster_schema
from storage.sqlite import schema as sqlite_schema
from storage.sqlite.store import SqliteStore
from tests.postgres import postgres_url  # noqa: F401  (fixture)

FIRST_SHARED_MIGRATION = "m009"
"""From this migration on, both histories hold the same migrations under the same names."""

SQLITE_TYPES = {"TEXT": "text", "INTEGER": "integer", "REAL": "real", "BLOB": "bytes"}
POSTGRES_TYPES = {
    "text": "text",
    "smallint": "integer",
    "integer": "integer",
    "bigint": "integer",
    "boolean": "integer",  # SQLite has no boolean type: it keeps 0 and 1 as integers
    "real": "real",
    "double precision": "real",
    "bytea": "bytes",
}
ON_DELETE = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}


@dataclass
class Table:
    """One table as both backends can state it."""

    columns: dict[str, tuple[str, bool]] = field(default_factory=dict)  # name: (type, nullable)
    primary_key: tuple[str, ...] = ()
    uniques: set[tuple[str, ...]] = field(default_factory=set)  # unique constraints
    indexes: set[tuple[str, tuple[str, ...], bool, bool]] = field(default_factory=set)
    """Indexes created by name: (name, columns, unique, partial)."""
    foreign_keys: set[tuple[tuple[str, ...], str, tuple[str, ...], str]] = field(
        default_factory=set
    )  # (columns, referenced table, referenced columns, on delete)


Schema = dict[str, Table]
SearchIndexes = set[tuple[str, str, tuple[str, ...]]]
"""Text-search indexes: (name, table indexed, columns)."""


def sqlite_tables(path: Path) -> Schema:
    db = sqlite3.connect(path)
    try:
        names = [
            row[1]
            for row in db.execute("PRAGMA table_list")
            if row[0] == "main" and row[2] == "table" and not row[1].startswith("sqlite_")
        ]
        return {name: _sqlite_table(db, name) for name in names}
    finally:
        db.close()


def sqlite_search_indexes(path: Path) -> SearchIndexes:
    """The FTS5 tables, each over the table named by its `content` option (not their
    vocabularies: PostgreSQL reads a word's rows from its index)."""
    db = sqlite3.connect(path)
    try:
        found: SearchIndexes = set()
        for name, sql in db.execute(
            "SELECT name, sql FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'"
            " AND sql LIKE '%USING fts5(%'"
        ):
            content = re.search(r"content='(\w+)'", sql)
            columns = tuple(row[1] for row in db.execute(f"PRAGMA table_info({name})"))
            found.add((name, content.group(1) if content else name, columns))
        return found
    finally:
        db.close()


def _sqlite_table(db: sqlite3.Connection, name: str) -> Table:
    table = Table()
    keyed = []
    for _, column, declared, notnull, _, pk in db.execute(f"PRAGMA table_info({name})"):
        family = SQLITE_TYPES.get(declared.upper(), declared)
        table.columns[column] = (family, not (notnull or pk))  # a key column holds no NULL
        if pk:
            keyed.append((pk, column))
    table.primary_key = tuple(column for _, column in sorted(keyed))
    for _, index, unique, origin, partial in db.execute(f"PRAGMA index_list({name})"):
        columns = tuple(row[2] for row in db.execute(f"PRAGMA index_info({index})"))
        if origin == "u":
            table.uniques.add(columns)
        elif origin == "c":
            table.indexes.add((index, columns, bool(unique), bool(partial)))
    found: dict[int, list[tuple[str, str, str, str]]] = {}
    for key, _, target, source, to, _, on_delete, _ in db.execute(
        f"PRAGMA foreign_key_list({name})"
    ):
        found.setdefault(key, []).append((source, target, to, on_delete))
    for parts in found.values():
        sources = tuple(p[0] for p in parts)
        table.foreign_keys.add((sources, parts[0][1], tuple(p[2] for p in parts), parts[0][3]))
    return table


async def postgres_tables(connection: asyncpg.Connection) -> Schema:
    tables: Schema = {
        row["table_name"]: Table()
        for row in await connection.fetch(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
    }
    for row in await connection.fetch(
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns"
        # A stored tsvector is a text-search index's (SQLite keeps it in an FTS5 table).
        " WHERE table_schema = current_schema() AND data_type <> 'tsvector'"
    ):
        family = POSTGRES_TYPES.get(row["data_type"], row["data_type"])
        tables[row["table_name"]].columns[row["column_name"]] = (
            family,
            row["is_nullable"] == "YES",
        )
    for row in await connection.fetch(
        """
        SELECT t.relname AS table_name, i.relname AS index_name, x.indisunique AS is_unique,
               x.indisprimary AS is_primary, x.indpred IS NOT NULL AS is_partial,
               EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)
                   AS backs_constraint,
               ARRAY(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY k(attnum, place)
                     JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
                     ORDER BY k.place) AS columns
        FROM pg_index x
        JOIN pg_class t ON t.oid = x.indrelid
        JOIN pg_class i ON i.oid = x.indexrelid
        JOIN pg_am am ON am.oid = i.relam
        JOIN pg_namespace n ON n.oid = t.relnamespace
        WHERE n.nspname = current_schema() AND am.amname = 'btree'
        """
    ):
        table, columns = tables[row["table_name"]], tuple(row["columns"])
        if row["is_primary"]:
            table.primary_key = columns
        elif row["backs_constraint"]:
            table.uniques.add(columns)
        else:
            table.indexes.add((row["index_name"], columns, row["is_unique"], row["is_partial"]))
    for row in await connection.fetch(
        """
        SELECT t.relname AS table_name, r.relname AS target, c.confdeltype::text AS on_delete,
               ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(attnum, place)
                     JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
                     ORDER BY k.place) AS sources,
               ARRAY(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(attnum, place)
                     JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum
                     ORDER BY k.place) AS targets
        FROM pg_constraint c
        JOIN pg_class t ON t.oid = c.conrelid
        JOIN pg_class r ON r.oid = c.confrelid
        JOIN pg_namespace n ON n.oid = t.relnamespace
        WHERE c.contype = 'f' AND n.nspname = current_schema()
        """
    ):
        tables[row["table_name"]].foreign_keys.add(
            (
                tuple(row["sources"]),
                row["target"],
                tuple(row["targets"]),
                ON_DELETE[row["on_delete"]],
            )
        )
    return tables


async def postgres_search_indexes(connection: asyncpg.Connection) -> SearchIndexes:
    """The GIN indexes, each with the columns it reads in the table's order: its key's,
    or those a generated key column (a stored tsvector) is computed from."""
    rows = await connection.fetch(
        """
        SELECT i.relname AS index_name, t.relname AS table_name,
               ARRAY(SELECT a.attname FROM pg_attribute a
                     WHERE a.attrelid = t.oid AND a.attgenerated = ''
                       AND (a.attnum = ANY (x.indkey) OR a.attnum IN (
                           SELECT d.refobjsubid FROM pg_attrdef ad
                           JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass
                                AND d.objid = ad.oid AND d.refobjid = t.oid
                           WHERE ad.adrelid = t.oid AND ad.adnum = ANY (x.indkey)))
                     ORDER BY a.attnum) AS columns
        FROM pg_index x
        JOIN pg_class t ON t.oid = x.indrelid
        JOIN pg_class i ON i.oid = x.indexrelid
        JOIN pg_am am ON am.oid = i.relam
        JOIN pg_namespace n ON n.oid = t.relnamespace
        WHERE n.nspname = current_schema() AND am.amname = 'gin'
        """
    )
    return {(r["index_name"], r["table_name"], tuple(r["columns"])) for r in rows}


def differences(sqlite: Schema, postgres: Schema) -> list[str]:
    """What one backend's schema has that the other's lacks, one line each."""
    found = [f"table {name} only on SQLite" for name in sorted(sqlite.keys() - postgres.keys())]
    found += [f"table {name} only on PostgreSQL" for name in sorted(postgres.keys() - sqlite)]
    for name in sorted(sqlite.keys() & postgres.keys()):
        left, right = sqlite[name], postgres[name]
        for part in ("columns", "primary_key", "uniques", "indexes", "foreign_keys"):
            if getattr(left, part) != getattr(right, part):
                found.append(
                    f"{name}.{part}: SQLite {getattr(left, part)!r}"
                    f" != PostgreSQL {getattr(right, part)!r}"
                )
    return found


@pytest.fixture
async def sqlite_schema_tables(tmp_path: Path) -> Schema:
    store = await SqliteStore.open(tmp_path / "bot.db")
    await store.close()
    return sqlite_tables(tmp_path / "bot.db")


async def postgres_schema_tables(url: str) -> tuple[Schema, Schema]:
    """The store's tables, then every table once the cluster's migrations ran too."""
    connection = await asyncpg.connect(url)
    try:
        await postgres_schema.migrate(connection)
        store = await postgres_tables(connection)
        await cluster_schema.migrate(connection)
        return store, await postgres_tables(connection)
    finally:
        await connection.close()


async def test_both_backends_create_the_same_store_schema(
    sqlite_schema_tables: Schema,
    postgres_url: str,  # noqa: F811
) -> None:
    postgres, _ = await postgres_schema_tables(postgres_url)
    store_tables = {
        name: table for name, table in postgres.items() if name not in cluster_schema.TABLES
    }
    assert differences(sqlite_schema_tables, store_tables) == []


async def test_both_backends_index_the_requests_and_the_knowledge_for_text_search(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    store = await SqliteStore.open(tmp_path / "bot.db")
    await store.close()
    connection = await asyncpg.connect(postgres_url)
    try:
        await postgres_schema.migrate(connection)
        postgres = await postgres_search_indexes(connection)
    finally:
        await connection.close()
    expected = {
        ("consultations_search", "consultations", ("initial_request",)),
        ("knowledge_search", "knowledge_chunks", ("section", "text")),
    }
    assert sqlite_search_indexes(tmp_path / "bot.db") == expected
    assert postgres == expected


async def test_postgresql_has_only_the_declared_cluster_tables_besides(
    sqlite_schema_tables: Schema,
    postgres_url: str,  # noqa: F811
) -> None:
    _, everything = await postgres_schema_tables(postgres_url)
    assert everything.keys() - sqlite_schema_tables.keys() == cluster_schema.TABLES


async def test_a_migration_added_to_one_backend_only_is_a_difference(
    sqlite_schema_tables: Schema,
    postgres_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The comparison sees a new index, a new column and a changed nullability."""
    extra = (
        "m999_one_backend",
        (
            "CREATE INDEX messages_author ON messages (author)",
            "ALTER TABLE chat_settings ADD COLUMN theme TEXT",
            "ALTER TABLE messages ALTER COLUMN author SET NOT NULL",
        ),
    )
    monkeypatch.setattr(postgres_schema, "MIGRATIONS", [*postgres_schema.MIGRATIONS, extra])
    postgres, _ = await postgres_schema_tables(postgres_url)
    store_tables = {n: t for n, t in postgres.items() if n not in cluster_schema.TABLES}
    found = differences(sqlite_schema_tables, store_tables)
    assert [line.split(":")[0] for line in found] == [
        "chat_settings.columns",
        "messages.columns",
        "messages.indexes",
    ]


def test_the_histories_share_names_from_the_first_shared_migration() -> None:
    sqlite_names = [m.__name__ for m in sqlite_schema.MIGRATIONS]
    postgres_names = [name for name, _ in postgres_schema.MIGRATIONS]
    cluster_names = [name for name, _ in cluster_schema.MIGRATIONS]
    assert [n for n in sqlite_names if n >= FIRST_SHARED_MIGRATION] == [
        n for n in postgres_names if n >= FIRST_SHARED_MIGRATION
    ]
    assert postgres_names == sorted(postgres_names)
    assert all(name.startswith("c") for name in cluster_names)
    assert cluster_names == sorted(cluster_names)


async def test_an_older_sqlite_file_gets_last_seq_from_its_messages(tmp_path: Path) -> None:
    """A consultation stored before m009 keeps its messages' order, and its next message
    comes after them."""
    path = tmp_path / "old.db"
    async with aiosqlite.connect(path, isolation_level=None) as db:
        before = [m for m in sqlite_schema.MIGRATIONS if m.__name__ < "m009_last_seq"]
        await sqlite_schema.migrate(db, before)
        await db.execute(
            "INSERT INTO consultations (id, chat_key, status, max_rounds, initial_request,"
            " created_at, last_activity_at) VALUES ('s1', 'tg:1', 'active', 3, 'Hi', 1, 1)"
        )
        for seq, role in [(1, "user"), (2, "assistant"), (3, "user")]:
            await db.execute(
                "INSERT INTO messages (consultation_id, seq, role, text, created_at)"
                " VALUES ('s1', ?, ?, ?, 1)",
                (seq, role, f"message {seq}"),
            )
        assert (await sqlite_schema.migrate(db))[0] == "m009_last_seq"
        rows = list(await db.execute_fetchall("SELECT last_seq FROM consultations"))
        assert rows == [(3,)]
