"""The store when its file or disk fails: clear errors, nothing half done, honest health.

A full disk is staged without root: ``PRAGMA max_page_count`` on the writer makes
SQLite answer SQLITE_FULL as soon as a write needs a page it does not have.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

from core.domain.consultation import Consultation, Message, Role, Status
from core.domain.errors import StoreUnavailable
from storage.errors import DatabaseUnusable
from storage.sqlite.store import SqliteStore
from tests.store_contract import count, make


@pytest.fixture
def now() -> list[float]:
    """The store's clock: tests move `now[0]` forward."""
    return [0.0]


@pytest.fixture
async def store(tmp_path: Path, now: list[float]) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(tmp_path / "bot.db", probe_interval=5.0, clock=lambda: now[0])
    yield opened
    await opened.close()


async def fill_disk(store: SqliteStore) -> None:
    """Make every write that needs one more page fail with SQLITE_FULL."""

    def cap(db: sqlite3.Connection) -> None:
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}").fetchall()

    await store._writer.run(cap)


async def free_disk(store: SqliteStore) -> None:
    await store._writer.run(lambda db: db.execute("PRAGMA max_page_count = 1073741823").fetchall())


def big(chat_key: str) -> Consultation:
    """A consultation whose first message needs new pages."""
    text = "x" * 20_000
    return make(chat_key, messages=[Message(Role.USER, text, 1000.0)])


async def test_a_full_disk_fails_the_write_with_store_unavailable(
    tmp_path: Path, store: SqliteStore
) -> None:
    """SQLITE_FULL reaches the caller as StoreUnavailable, and nothing of the write is kept."""
    await fill_disk(store)
    consultation = big("chat:1")
    with pytest.raises(StoreUnavailable) as raised:
        await store.create(consultation)
    assert "SQLITE_FULL" in str(raised.value)
    assert await store.get(consultation.id) is None


async def test_writes_batched_with_a_failing_one_fail_together(store: SqliteStore) -> None:
    """When SQLite rolls the whole shared transaction back, every write in it fails clearly."""
    small = make("chat:small")
    await fill_disk(store)
    outcomes = await asyncio.gather(
        store.create(small), store.create(big("chat:big")), return_exceptions=True
    )
    assert all(isinstance(outcome, StoreUnavailable) for outcome in outcomes), outcomes
    assert await store.get(small.id) is None


async def test_health_reports_a_full_disk_and_its_recovery(
    store: SqliteStore, now: list[float]
) -> None:
    """A failed user write makes the store unhealthy at once; freed space heals it."""
    assert await store.ping()
    await fill_disk(store)
    with pytest.raises(StoreUnavailable):
        await store.create(big("chat:1"))
    assert not await store.ping()
    now[0] += 10
    assert not await store.ping()  # the probe commits now, and cannot
    await free_disk(store)
    assert not await store.ping()  # the last proof is trusted for the probe interval
    now[0] += 10
    assert await store.ping()
    await store.create(make("chat:2"))


async def test_health_probes_writability_without_a_user_write(
    store: SqliteStore, now: list[float]
) -> None:
    """With no traffic, the periodic write probe finds a store that cannot write."""
    assert await store.ping()
    await fill_disk(store)
    assert await store.ping()  # proven 0 s ago: cached
    now[0] += 5
    assert not await store.ping()


@pytest.mark.parametrize("replace", [False, True], ids=["deleted", "replaced"])
async def test_a_deleted_or_replaced_file_is_unhealthy_and_refuses_writes(
    tmp_path: Path, store: SqliteStore, replace: bool
) -> None:
    """Writing on into an orphaned file would lose everything at restart: refuse instead."""
    path = tmp_path / "bot.db"
    assert await store.ping()
    path.unlink()
    if replace:
        path.write_bytes(b"")
    assert not await store.ping()
    with pytest.raises(StoreUnavailable, match=r"gone|replaced"):
        await store.create(make())


async def test_open_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    """A text file at DB_PATH is refused with one line, and left untouched."""
    path = tmp_path / "notes.db"
    path.write_text("this is not a database\n" * 100)
    with pytest.raises(DatabaseUnusable) as raised:
        await SqliteStore.open(path)
    assert str(raised.value) == f"{path} is not a SQLite database"
    assert path.read_text() == "this is not a database\n" * 100


async def test_open_refuses_a_corrupt_database(tmp_path: Path) -> None:
    """A damaged page found by quick_check stops the open, before any migration runs."""
    path = tmp_path / "bot.db"
    store = await SqliteStore.open(path)
    for n in range(200):
        await store.create(make(f"chat:{n}"))
    await store.close()
    page = 4096
    with path.open("r+b") as file:
        file.seek(page * 5)
        file.write(b"\xff" * page)
    with pytest.raises(DatabaseUnusable, match=r"corrupt|malformed"):
        await SqliteStore.open(path)


@pytest.mark.parametrize("where", ["parent is a file", "path is a folder"])
async def test_open_refuses_an_unusable_place(tmp_path: Path, where: str) -> None:
    """A DB_PATH that cannot hold a database is one clear line, not a traceback."""
    if where == "parent is a file":
        (tmp_path / "file").write_text("")
        path = tmp_path / "file" / "bot.db"
    else:
        path = tmp_path / "folder"
        path.mkdir()
    with pytest.raises(DatabaseUnusable) as raised:
        await SqliteStore.open(path)
    assert str(path) in str(raised.value) and "\n" not in str(raised.value)


async def test_a_purge_gives_the_space_back(tmp_path: Path) -> None:
    """After purging most data the file shrinks, and an old file is converted at open."""
    path = tmp_path / "bot.db"
    async with aiosqlite.connect(path) as db:  # a file made before incremental auto-vacuum
        await db.execute("PRAGMA auto_vacuum = NONE")
        await db.execute("CREATE TABLE leftover (x)")
        await db.commit()
    store = await SqliteStore.open(path)
    text = "y" * 4000
    for n in range(600):  # far more data than the schema's own pages, which grow with it
        consultation = make(f"chat:{n}", messages=[Message(Role.USER, text, 10.0)], at=10.0)
        await store.create(consultation)
        await store.set_status(consultation.id, Status.COMPLETE, at=10.0)
    await store.close()
    full = path.stat().st_size

    store = await SqliteStore.open(path)
    assert await store.purge(older_than=100.0) == 600
    await store.close()
    schema_only = tmp_path / "schema.db"  # the schema's own pages: kept whatever is purged
    await (await SqliteStore.open(schema_only)).close()
    empty = schema_only.stat().st_size
    assert path.stat().st_size < empty + (full - empty) / 10
    assert await count(path, "SELECT COUNT(*) FROM messages") == 0
