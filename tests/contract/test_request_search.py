"""The console's text search on SQLite and PostgreSQL (`tests.store_contract.STORE_KINDS`):
through each store's trigram index it finds exactly the requests holding the text, case
aside (Cyrillic too, from 3 characters), with the other filters and page after page; text
that looks like query syntax is searched for as typed; deleted consultations leave the
index; the migration indexes what is already stored. Then what one backend alone has:
SQLite's index has no row without its consultation, and PostgreSQL searches without
`pg_trgm` where it cannot be used, and with it in a second schema of the same database."""

from __future__ import annotations

import logging
import sqlite3
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import aiosqlite
import asyncpg
import pytest

from core.domain.audit import AuditEntry
from core.domain.consultation import Status
from core.domain.listing import ConsultationQuery, Cursor
from storage.postgres import schema as postgres_schema
from storage.postgres.store import PostgresStore
from storage.sqlite import admin as sqlite_admin
from storage.sqlite import schema as sqlite_schema
from storage.sqlite.store import SqliteStore
from tests.postgres import (
    connect_or_skip,
    database_url_for_tests,
    fresh_schema,
    with_search_path,
)
from tests.store_contract import make

if TYPE_CHECKING:
    from app.stores import Store

HOSTILE = [
    'he said "hi" twice',
    "apples AND pears",
    "tea OR coffee",
    "NEAR(cats dogs)",
    "initial_request: mine",
    "prefix* star",
    "^caret start",
    "(brackets) - minus + plus",
    "back\\slash ' quote",
]
"""Requests that hold FTS5 query syntax: operators, a column filter, prefix, quotes."""


async def _add(store: Store, request: str, *, at: float, chat: str = "") -> str:
    c = make(chat or f"tg:{uuid.uuid4().int % 10**9}", at=at, status=Status.COMPLETE)
    c.initial_request = request
    await store.create(c)
    return c.id


async def _all(store: Store, query: ConsultationQuery) -> list[str]:
    """Every page of `query` (3 rows a page), the ids in order."""
    ids: list[str] = []
    before: Cursor | None = None
    while True:
        page = await store.list_consultations(
            ConsultationQuery(
                since=query.since, status=query.status, chat_key=query.chat_key,
                text=query.text, before=before, limit=3,
            )
        )  # fmt: skip
        ids += [row.id for row in page]
        if len(page) < 3:
            return ids
        before = page[-1].cursor


async def test_search_finds_exactly_the_requests_holding_the_text(store: Store) -> None:
    """Every page of every search holds what a plain substring test, case aside, finds,
    newest first; alone and with a chat or a start date."""
    words = ["garden", "budget", "trip", "Garden party", "gardening", "the GARDEN", "no"]
    requests = {}
    for n in range(40):
        request = f"Question {n}: {words[n % len(words)]}"
        chat = "tg:7" if n % 4 == 0 else ""
        requests[await _add(store, request, at=1000.0 + n, chat=chat)] = (request, chat, n)
    newest_first = sorted(requests, key=lambda i: -requests[i][2])
    for text in ["garden", "GARDEN PARTY", "ion 1", "on 3", "Question", "absent", "ga", "G"]:
        expected = [i for i in newest_first if text.lower() in requests[i][0].lower()]
        assert await _all(store, ConsultationQuery(text=text)) == expected, text
        in_chat = [i for i in expected if requests[i][1] == "tg:7"]
        assert await _all(store, ConsultationQuery(text=text, chat_key="tg:7")) == in_chat
        later = [i for i in expected if requests[i][2] >= 20]
        assert await _all(store, ConsultationQuery(text=text, since=1020.0)) == later


async def test_text_that_looks_like_query_syntax_is_searched_for_as_typed(store: Store) -> None:
    """Quotes, AND/OR/NEAR, a column filter, `*`, `^` and brackets in the search neither
    fail nor change it: each finds the one request holding it."""
    ids = [await _add(store, request, at=1000.0 + n) for n, request in enumerate(HOSTILE)]
    for request, expected in zip(HOSTILE, ids, strict=True):
        assert await _all(store, ConsultationQuery(text=request)) == [expected], request
    assert await _all(store, ConsultationQuery(text='"hi"')) == [ids[0]]
    assert await _all(store, ConsultationQuery(text='"')) == [ids[0]]
    assert await _all(store, ConsultationQuery(text='""')) == []
    assert await _all(store, ConsultationQuery(text="AND")) == [ids[1]]
    assert await _all(store, ConsultationQuery(text="apples OR nothing")) == []
    assert await _all(store, ConsultationQuery(text="NEAR(")) == [ids[3]]
    assert await _all(store, ConsultationQuery(text="initial_request:")) == [ids[4]]
    assert await _all(store, ConsultationQuery(text="initial_request:mine")) == []
    assert await _all(store, ConsultationQuery(text="fix*")) == [ids[5]]
    assert await _all(store, ConsultationQuery(text="pre*")) == []
    assert await _all(store, ConsultationQuery(text="^car")) == [ids[6]]
    assert await _all(store, ConsultationQuery(text="\\slash '")) == [ids[8]]


async def test_cyrillic_text_is_found_whatever_its_case(store: Store) -> None:
    """From 3 characters on, Russian text matches in any case (as Latin does)."""
    found = await _add(store, "Привет, как СОСТАВИТЬ бюджет?", at=1000.0)
    await _add(store, "Пока", at=1001.0)
    for text in ["привет", "ПРИВЕТ", "составить", "Бюджет", "как"]:
        assert await _all(store, ConsultationQuery(text=text)) == [found], text


async def test_deleted_consultations_are_no_longer_found(store: Store) -> None:
    """Deleted by the console, purged, or with their chat: the search no longer finds them."""
    deleted = await _add(store, "findable one", at=1000.0)
    await _add(store, "findable two", at=1001.0)
    await _add(store, "findable three", at=5000.0, chat="tg:99")
    kept = await _add(store, "findable four", at=5001.0)
    assert len(await _all(store, ConsultationQuery(text="findable"))) == 4
    audit = AuditEntry(6000.0, "session ab12", "delete_consultation", deleted)
    assert await store.delete_consultation(deleted, audit)
    assert await store.purge(older_than=2000.0) == 1
    assert await store.forget_chat("tg:99") == 1
    assert await _all(store, ConsultationQuery(text="findable")) == [kept]
    assert await _all(store, ConsultationQuery(text="two")) == []


# -- SQLite ---------------------------------------------------------------------------------


async def test_sqlite_pages_are_the_same_whichever_way_the_matches_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Newest rows first, each sought alone or by their range, or every match: one result."""
    store = await SqliteStore.open(tmp_path / "bot.db")
    try:
        requests = {}
        for n in range(60):
            request = f"request {n} " + ("rare" if n % 17 == 0 else "common")
            requests[await _add(store, request, at=1000.0 + n)] = (request, n)
        newest_first = sorted(requests, key=lambda i: -requests[i][1])
        for window, seek in [(1000, 64), (1000, 0), (5, 0), (5, 64), (1, 0)]:
            monkeypatch.setattr(sqlite_admin, "SEARCH_WINDOW_ROWS", window)
            monkeypatch.setattr(sqlite_admin, "SEARCH_SEEK_ROWS", seek)
            for text in ["rare", "common", "request 1", "nowhere"]:
                expected = [i for i in newest_first if text in requests[i][0]]
                assert await _all(store, ConsultationQuery(text=text)) == expected
    finally:
        await store.close()


def _orphans(path: Path) -> tuple[int, int]:
    """Rows the index keeps whose consultation is gone, and consultations it lacks."""
    db = sqlite3.connect(path)
    try:
        db.execute("INSERT INTO consultations_search (consultations_search, rank)"
                   " VALUES ('integrity-check', 1)")  # fmt: skip
        orphans = db.execute(
            "SELECT COUNT(*) FROM consultations_search_docsize"
            " WHERE id NOT IN (SELECT rowid FROM consultations)"
        ).fetchone()[0]
        missing = db.execute(
            "SELECT COUNT(*) FROM consultations"
            " WHERE rowid NOT IN (SELECT id FROM consultations_search_docsize)"
        ).fetchone()[0]
        return orphans, missing
    finally:
        db.close()


async def test_sqlite_index_keeps_no_row_of_a_deleted_consultation(tmp_path: Path) -> None:
    """After deletes, a purge, a forgotten chat and a changed request, the index holds one
    row per consultation, and its integrity check (against the table) passes."""
    path = tmp_path / "bot.db"
    store = await SqliteStore.open(path)
    try:
        ids = [await _add(store, f"request {n}", at=1000.0 + n, chat=f"tg:{n}") for n in range(6)]
        await store.delete_consultation(ids[0], AuditEntry(1.0, "a", "delete", ids[0]))
        await store.purge(older_than=1002.5)
        await store.forget_chat("tg:3")
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE consultations SET initial_request = 'changed' WHERE id = ?", (ids[4],))
    assert _orphans(path) == (0, 0)
    store = await SqliteStore.open(path)
    try:
        assert await _all(store, ConsultationQuery(text="changed")) == [ids[4]]
        assert await _all(store, ConsultationQuery(text="request")) == [ids[5]]
    finally:
        await store.close()


async def test_sqlite_migration_indexes_the_consultations_already_stored(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    async with aiosqlite.connect(path, isolation_level=None) as db:
        before = [m for m in sqlite_schema.MIGRATIONS if m.__name__ < "m021"]
        await sqlite_schema.migrate(db, before)
        for n, request in enumerate(["an old garden", "Старый сад", "a trip"]):
            await db.execute(
                "INSERT INTO consultations (id, chat_key, status, max_rounds, initial_request,"
                " created_at, last_activity_at) VALUES (?, 'tg:1', 'complete', 3, ?, ?, ?)",
                (f"s{n}", request, 1000.0 + n, 1000.0 + n),
            )
    store = await SqliteStore.open(path)
    try:
        assert await _all(store, ConsultationQuery(text="GARDEN")) == ["s0"]
        assert await _all(store, ConsultationQuery(text="старый")) == ["s1"]
    finally:
        await store.close()
    assert _orphans(path) == (0, 0)


# -- PostgreSQL -----------------------------------------------------------------------------


async def _plan(url: str, pattern: str) -> str:
    connection = await asyncpg.connect(url)
    try:
        await connection.execute("SET enable_seqscan = off")
        rows = await connection.fetch(
            "EXPLAIN SELECT id FROM consultations WHERE initial_request ILIKE $1", pattern
        )
        return "\n".join(row[0] for row in rows)
    finally:
        await connection.close()


async def test_postgres_migration_indexes_the_consultations_already_stored() -> None:
    """Rows stored before the migration are found after it, through the trigram index."""
    async with fresh_schema() as url:
        connection = await asyncpg.connect(url)
        try:
            before = [m for m in postgres_schema.MIGRATIONS if m[0] < "m021"]
            await postgres_schema.apply_migrations(connection, before)
            for n, request in enumerate(["an old garden", "Старый сад", "a trip"]):
                await connection.execute(
                    "INSERT INTO consultations (id, chat_key, status, max_rounds,"
                    " initial_request, created_at, last_activity_at)"
                    " VALUES ($1, 'tg:1', 'complete', 3, $2, $3, $3)",
                    f"s{n}",
                    request,
                    1000.0 + n,
                )
        finally:
            await connection.close()
        store = await PostgresStore.open(url, pool_size=2)
        try:
            assert await _all(store, ConsultationQuery(text="GARDEN")) == ["s0"]
            assert await _all(store, ConsultationQuery(text="старый")) == ["s1"]
        finally:
            await store.close()
        assert "Bitmap Index Scan on consultations_search" in await _plan(url, "%garden%")


async def test_postgres_second_schema_in_one_database_is_indexed_too() -> None:
    """`pg_trgm` is installed once per database: a store in another schema, whose search
    path does not name the extension's, still gets its index and uses it."""
    async with fresh_schema() as first, fresh_schema() as second:
        for url in (first, second):
            store = await PostgresStore.open(url, pool_size=2)
            try:
                found = await _add(store, "second schema request", at=1000.0)
                assert await _all(store, ConsultationQuery(text="SCHEMA REQ")) == [found]
            finally:
                await store.close()
            assert "Bitmap Index Scan on consultations_search" in await _plan(url, "%chem%")


async def test_postgres_without_pg_trgm_starts_and_searches_unindexed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A role that may not create the extension: a warning says search is not indexed,
    the store opens, and search finds the same rows; a later start tries again."""
    role = f"nocreate_{uuid.uuid4().hex[:10]}"
    url = database_url_for_tests()
    admin = await connect_or_skip(url)
    schema = f"test_{uuid.uuid4().hex[:12]}"
    try:
        await admin.execute("DROP EXTENSION IF EXISTS pg_trgm CASCADE")
        await admin.execute(f'CREATE ROLE "{role}" LOGIN')
        await admin.execute(f'CREATE SCHEMA "{schema}" AUTHORIZATION "{role}"')
        limited = with_search_path(url.replace("postgres@", f"{role}@", 1), schema)
        with caplog.at_level(logging.WARNING, logger=postgres_schema.__name__):
            store = await PostgresStore.open(limited, pool_size=2)
        try:
            assert "text search is not indexed" in caplog.text
            found = await _add(store, "Привет, unindexed", at=1000.0)
            assert await _all(store, ConsultationQuery(text="ПРИВЕТ")) == [found]
        finally:
            await store.close()
        await admin.execute(f'SET search_path = "{schema}"')
        assert await admin.fetchval("SELECT to_regclass('consultations_search')") is None
        await admin.execute("CREATE EXTENSION pg_trgm SCHEMA public")
        await admin.execute("RESET search_path")
        store = await PostgresStore.open(limited, pool_size=2)  # indexed at this start
        await store.close()
        assert "Bitmap Index Scan on consultations_search" in await _plan(limited, "%priv%")
    finally:
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.execute("DROP EXTENSION IF EXISTS pg_trgm CASCADE")
        await admin.execute(f'DROP ROLE IF EXISTS "{role}"')
        await admin.close()
