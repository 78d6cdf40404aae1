"""What only the SQLite store has: its file (created, migrated, WAL), its migrations,
durability of the WAL across a killed process, and its page caches' bound. Behaviour every
store shares is in the contract suite, tests/contract/test_storage.py."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import signal
import sqlite3
import sys
import textwrap
from pathlib import Path

import aiosqlite
import pytest

from core.domain.consultation import Message, Role
from core.domain.ports import ConsultationStore
from storage.sqlite.schema import MIGRATIONS, applied_migrations, migrate
from storage.sqlite.store import SqliteStore
from tests.store_contract import count, make

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """The store's file (tests/conftest.py `store`), in a folder that does not exist yet."""
    return tmp_path / "nested" / "bot.db"


async def test_store_satisfies_the_port(store: SqliteStore) -> None:
    """SqliteStore is usable wherever the engine expects a ConsultationStore."""
    port: ConsultationStore = store
    assert await port.load_active("nobody") is None
    assert await store.ping()


async def test_blank_database_is_migrated(db_path: Path, store: SqliteStore) -> None:
    """Opening a missing file creates its folder, the schema, WAL mode and the migration log."""
    assert db_path.exists()  # noqa: ASYNC240 (a stat of a local file in a test)
    async with aiosqlite.connect(db_path) as db:
        assert await applied_migrations(db) == [m.__name__ for m in MIGRATIONS]
        tables = {
            row[0]
            for row in await db.execute_fetchall(
                "SELECT name FROM sqlite_master WHERE type='table'"
            )
        }
        (mode,) = next(iter(await db.execute_fetchall("PRAGMA journal_mode")))
    assert {"consultations", "messages", "chat_settings", "schema_migrations"} <= tables
    assert mode == "wal"


async def test_reopen_keeps_data_and_does_not_rerun_migrations(db_path: Path) -> None:
    """A second open finds the data and applies no migration again."""
    store = await SqliteStore.open(db_path)
    consultation = make()
    await store.create(consultation)
    await store.close()
    before = await count(db_path, "SELECT COUNT(*) FROM schema_migrations")

    store = await SqliteStore.open(db_path)
    try:
        assert await store.get(consultation.id) == consultation
    finally:
        await store.close()
    assert await count(db_path, "SELECT COUNT(*) FROM schema_migrations") == before
    async with aiosqlite.connect(db_path, isolation_level=None) as db:
        assert await migrate(db) == []


async def test_failed_migration_leaves_nothing_behind(tmp_path: Path) -> None:
    """A migration that fails is rolled back whole and not recorded; earlier ones stay."""

    async def m001_ok(db: aiosqlite.Connection) -> None:
        await db.execute("CREATE TABLE kept (x)")

    async def m002_broken(db: aiosqlite.Connection) -> None:
        await db.execute("CREATE TABLE half (x)")
        await db.execute("THIS IS NOT SQL")

    async with aiosqlite.connect(tmp_path / "m.db", isolation_level=None) as db:
        with pytest.raises(aiosqlite.OperationalError):
            await migrate(db, [m001_ok, m002_broken])
        assert await applied_migrations(db) == ["m001_ok"]
        names = {r[0] for r in await db.execute_fetchall("SELECT name FROM sqlite_master")}
        assert "kept" in names
        assert "half" not in names
        assert await migrate(db, [m001_ok]) == []


async def test_committed_message_survives_process_kill(db_path: Path) -> None:
    """A message whose add_message returned is on disk even if the process is SIGKILLed."""
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal
        from core.domain.consultation import Consultation, Message, Role
        from storage.sqlite.store import SqliteStore

        async def main():
            store = await SqliteStore.open({str(db_path)!r})
            c = Consultation("c1", "chat:k", 3, "hello", 1.0, 1.0,
                             messages=[Message(Role.USER, "hello", 1.0)])
            await store.create(c)
            await store.add_message("c1", Message(Role.USER, "still here", 2.0),
                                    last_activity_at=2.0)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
        """
    )
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", script, cwd=ROOT)
    assert await process.wait() == -signal.SIGKILL
    # Never checkpointed: the commit is only in the WAL the killed process left.
    assert os.path.exists(f"{db_path}-wal")  # noqa: ASYNC240

    store = await SqliteStore.open(db_path)
    try:
        resumed = await store.load_active("chat:k")
    finally:
        await store.close()
    assert resumed is not None
    assert [m.text for m in resumed.messages] == ["hello", "still here"]


async def test_update_ids_are_remembered_for_a_day_and_no_longer(
    db_path: Path, store: SqliteStore
) -> None:
    """A repeat within a day is recognised; older ids are deleted as new ones arrive,
    so the table stays bounded."""
    assert await store.remember_update(100, at=0.0)
    assert not await store.remember_update(100, at=10.0)
    assert await store.remember_update(101, at=20.0)
    assert await store.remember_update(102, at=86_430.0)  # a day after the first two
    assert await count(db_path, "SELECT COUNT(*) FROM telegram_updates") == 1
    assert await store.remember_update(100, at=86_440.0)  # forgotten: Telegram gave up long ago
    assert await store.remember_update(2_000_102, at=86_450.0)  # a million ids later
    assert await count(db_path, "SELECT COUNT(*) FROM telegram_updates") == 1


async def test_idempotency_keys_survive_the_claims_migration(tmp_path: Path) -> None:
    """Keys stored before claims had owners keep their reply and session; new claims may
    have no session yet."""
    db_path = tmp_path / "old.db"
    async with aiosqlite.connect(db_path, isolation_level=None) as db:
        await db.execute("PRAGMA foreign_keys = ON")
        before = [m for m in MIGRATIONS if m.__name__ < "m007_idempotency_claims"]
        await migrate(db, before)
        await db.execute(
            "INSERT INTO consultations (id, chat_key, status, max_rounds, initial_request,"
            " created_at, last_activity_at) VALUES ('s1', 'api:s1', 'active', 3, 'Hi', 1, 1)"
        )
        await db.execute(
            "INSERT INTO idempotency_keys (client, key, fingerprint, session_id, response,"
            " created_at) VALUES ('c', 'k', 'f', 's1', '{}', 5)"
        )
        assert (await migrate(db))[0] == "m007_idempotency_claims"
    store = await SqliteStore.open(db_path)
    try:
        found = await store.find_idempotency_key("c", "k")
        assert found is not None and tuple(found) == ("f", "s1", "{}", None)
        held = await store.claim_idempotency_key(
            "c", "new", fingerprint="f", owner="o", at=9.0, lease_until=39.0
        )
        assert held is not None and held.session_id is None
    finally:
        await store.close()


async def test_the_page_caches_stay_small_however_large_the_file(db_path: Path) -> None:
    """Writing and reading back a 7 MB database leaves SQLite holding under 2.5 MB of its
    own memory (both connections' page caches, schema and statements): with SQLite's
    default caches of 2,000 KiB each it held 4.7 MB, and kept more as the file grew."""
    library = ctypes.CDLL(ctypes.util.find_library("sqlite3"))
    library.sqlite3_libversion.restype = ctypes.c_char_p
    library.sqlite3_memory_used.restype = ctypes.c_int64
    if library.sqlite3_libversion().decode() != sqlite3.sqlite_version:
        pytest.skip("Python's sqlite3 does not use the system's libsqlite3")
    before = library.sqlite3_memory_used()
    store = await SqliteStore.open(db_path)
    try:
        ids = []
        for batch in range(30):
            texts = [f"request {batch}.{n}: " + "x" * 2000 for n in range(50)]
            made = [
                make(f"chat:{batch}:{n}", messages=[Message(Role.USER, text, 1000.0)])
                for n, text in enumerate(texts)
            ]
            await asyncio.gather(*(store.create(consultation) for consultation in made))
            ids += [consultation.id for consultation in made]
        for start in range(0, len(ids), 50):
            read = await asyncio.gather(*(store.get(i) for i in ids[start : start + 50]))
            assert all(consultation is not None for consultation in read)
        held = library.sqlite3_memory_used() - before
    finally:
        await store.close()
    assert db_path.stat().st_size > 7_000_000  # noqa: ASYNC240 (a stat of a local file)
    assert held < 2_500_000, f"SQLite holds {held / 1e6:.1f} MB"
