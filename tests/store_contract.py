"""The store implementations the contract suite (tests/contract/) runs against.

Each `StoreKind` knows how to make a fresh, empty database for one test, open a store
on it (several stores may be open on one database at once, as several worker
processes would be), count a table's rows behind the store's back (to prove a write
left nothing behind), and run a statement behind it (to store what the store never
would, such as a damaged value). A new store implementation, such as PostgreSQL, adds one
`StoreKind` to `STORE_KINDS` and passes the same tests; what only SQLite has (its
file, WAL, pragmas, migrations of the file, disk faults) is tested in
tests/storage/test_storage_sqlite.py instead.

This module is also a pytest plugin (tests/conftest.py plugs it in for every test): the
fixture `kind` is each `StoreKind` in turn, so a test that asks for it, directly or through
another fixture, runs once per store with the kind's name as its id; `database` is a fresh
database of that kind, dropped after the test. The contract suite's own `store` and `rows`
are in tests/contract/conftest.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import aiosqlite
import asyncpg
import pytest

from core.domain.consultation import Consultation, Message, Role
from storage.postgres.store import PostgresStore
from storage.sqlite.store import SqliteStore
from tests.postgres import connect_or_skip, database_url_for_tests, with_search_path

if TYPE_CHECKING:
    from app.stores import Store

Rows = Callable[..., Awaitable[int]]
"""rows(table, **equals): a `StoreKind.count` bound to one database."""


@dataclass(frozen=True)
class StoreKind:
    name: str  # the pytest id of the parametrised tests
    new_database: Callable[[Path], Awaitable[str]]
    """The address of a fresh, empty database, given the test's temporary folder."""
    open: Callable[[str], Awaitable[Store]]
    """Open (and migrate) a store on the database at that address."""
    count: Callable[..., Awaitable[int]]
    """count(address, table, **equals): rows of `table` whose columns equal `equals`."""
    execute: Callable[..., Awaitable[None]]
    """execute(address, sql, *params): run one statement behind the store (`$1` parameters)."""
    drop_database: Callable[[str], Awaitable[None]]
    """Remove what `new_database` made."""


async def _sqlite_database(tmp_path: Path) -> str:
    return str(tmp_path / "nested" / "bot.db")


async def _sqlite_drop(address: str) -> None:
    """The file goes with the test's temporary folder."""


async def _sqlite_open(address: str) -> Store:
    return await SqliteStore.open(address)


async def _sqlite_count(address: str, table: str, **equals: object) -> int:
    where = " AND ".join(f"{column} = ?" for column in equals) or "1"
    return await count(
        Path(address), f"SELECT COUNT(*) FROM {table} WHERE {where}", *equals.values()
    )


async def _sqlite_execute(address: str, sql: str, *params: object) -> None:
    async with aiosqlite.connect(address) as db:
        await db.execute(sql.replace("$", "?"), params)
        await db.commit()


async def _postgres_database(tmp_path: Path) -> str:
    """A new schema in the test database; every connection of the store uses it."""
    url = database_url_for_tests()
    admin = await connect_or_skip(url)
    try:
        schema = f"test_{uuid.uuid4().hex[:12]}"
        await admin.execute(f'CREATE SCHEMA "{schema}"')
    finally:
        await admin.close()
    return with_search_path(url, schema)


async def _postgres_open(address: str) -> Store:
    return await PostgresStore.open(address, pool_size=4)


async def _postgres_count(address: str, table: str, **equals: object) -> int:
    where = " AND ".join(f"{column} = ${i}" for i, column in enumerate(equals, 1)) or "TRUE"
    connection = await asyncpg.connect(address)
    try:
        return int(
            await connection.fetchval(
                f"SELECT COUNT(*) FROM {table} WHERE {where}", *equals.values()
            )
        )
    finally:
        await connection.close()


async def _postgres_execute(address: str, sql: str, *params: object) -> None:
    connection = await asyncpg.connect(address)
    try:
        await connection.execute(sql, *params)
    finally:
        await connection.close()


async def _postgres_drop(address: str) -> None:
    connection = await asyncpg.connect(address)
    try:
        schema = await connection.fetchval("SELECT current_schema()")
        await connection.execute(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        await connection.close()


STORE_KINDS: list[StoreKind] = [
    StoreKind(
        "sqlite", _sqlite_database, _sqlite_open, _sqlite_count, _sqlite_execute, _sqlite_drop
    ),
    StoreKind(
        "postgres",
        _postgres_database,
        _postgres_open,
        _postgres_count,
        _postgres_execute,
        _postgres_drop,
    ),
]


@pytest.fixture(params=STORE_KINDS, ids=lambda kind: kind.name)
def kind(request: pytest.FixtureRequest) -> StoreKind:
    """The store implementation under test."""
    kind: StoreKind = request.param
    return kind


@pytest.fixture
async def database(kind: StoreKind, tmp_path: Path) -> AsyncIterator[str]:
    """The address of a fresh database of `kind`, dropped after the test (after the
    fixtures that use it are closed)."""
    address = await kind.new_database(tmp_path)
    yield address
    await kind.drop_database(address)


async def count(path: Path, sql: str, *params: object) -> int:
    """The first column of the first row of `sql` run on the SQLite file at `path`."""
    async with aiosqlite.connect(path) as db:
        rows = list(await db.execute_fetchall(sql, params))
    return int(rows[0][0])


def make(
    chat_key: str = "chat:1",
    *,
    messages: list[Message] | None = None,
    at: float = 1000.0,
    **fields: object,
) -> Consultation:
    """A new ACTIVE consultation in `chat_key` holding one user message (unless given)."""
    text = "How do I choose a database?"
    return Consultation(
        id=str(uuid.uuid4()),
        chat_key=chat_key,
        max_rounds=3,
        initial_request=text,
        created_at=at,
        last_activity_at=at,
        messages=[Message(Role.USER, text, at, author="Ann")] if messages is None else messages,
        **fields,  # type: ignore[arg-type]
    )
