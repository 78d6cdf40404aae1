"""Who asked a consultation (`Consultation.person`), on SQLite and PostgreSQL: stored when
it is created and read back with it, the console's list of one person's consultations,
nothing of it left once the consultation is deleted, and the rows stored before
`m025_consultation_person` given the person they can be known by."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import aiosqlite
import asyncpg

from core.domain.audit import AuditEntry
from core.domain.consultation import Status
from core.domain.facts import ANONYMOUS_ADMIN_ID
from core.domain.listing import ConsultationQuery
from storage.postgres import schema as postgres_schema
from storage.postgres.store import PostgresStore
from storage.sqlite import schema as sqlite_schema
from storage.sqlite.store import SqliteStore
from tests.postgres import fresh_schema
from tests.store_contract import Rows, make

if TYPE_CHECKING:
    from app.stores import Store

MIGRATION = "m025_consultation_person"


async def test_the_person_is_stored_with_the_consultation_and_lists_theirs(store: Store) -> None:
    first = make("api:s-1", at=1000.0, person="api:u-7")
    second = make("api:s-2", at=2000.0, person="api:u-7")
    other = make("tg:5", at=1500.0, person="tg:5")
    nobody = make("api:s-3", at=1700.0)
    for consultation in (first, second, other, nobody):
        await store.create(consultation)
    found = await store.get(first.id)
    assert found is not None and found.person == "api:u-7"
    loaded = await store.get(nobody.id)
    assert loaded is not None and loaded.person is None
    listed = await store.list_consultations(ConsultationQuery(person="api:u-7"))
    assert [row.id for row in listed] == [second.id, first.id]
    paged = await store.list_consultations(
        ConsultationQuery(person="api:u-7", before=listed[0].cursor)
    )
    assert [row.id for row in paged] == [first.id]
    searched = await store.list_consultations(ConsultationQuery(person="tg:5", text="database"))
    assert [row.id for row in searched] == [other.id]
    assert await store.list_consultations(ConsultationQuery(person="api:u-%")) == []


async def test_deleting_the_consultations_leaves_nothing_of_their_person(
    store: Store, rows: Rows
) -> None:
    """`/forget` (the chat's consultations), `DELETE /api/sessions/{id}` and the console's
    Delete take the person with the row: no consultation names them afterwards."""
    in_chat = [make("tg:5", at=1000.0 + n, person="tg:5") for n in range(2)]
    in_chat[0].status = Status.COMPLETE  # a chat has one active consultation at a time
    session = make("api:s-9", person="api:u-9")
    for consultation in (*in_chat, session):
        await store.create(consultation)
    assert await rows("consultations", person="tg:5") == 2
    assert await store.forget_chat("tg:5") == 2
    assert await store.delete_consultation(session.id, AuditEntry(1.0, "op", "delete", session.id))
    for person in ("tg:5", "api:u-9"):
        assert await rows("consultations", person=person) == 0
        assert await store.list_consultations(ConsultationQuery(person=person)) == []


async def test_forgetting_a_persons_memory_clears_it_from_their_consultations(
    store: Store,
) -> None:
    """/forget, `DELETE /api/users/{userId}/memory` and the console's Delete all memory:
    the facts a consultation of that person read when it started go too, in a group as in
    private; the consultation stays (with its person) and so do others' facts."""
    group = make("tg:-100", person="tg:11", memory_owner="tg:11@tg:-100")
    group.memory_facts = ("Lives in Riga",)
    done = make("tg:11", person="tg:11", memory_owner="tg:11", memory_facts=("Has a dog",))
    done.status = Status.COMPLETE
    other = make("api:s-1", person="api:u@x", memory_owner="api:u@x", memory_facts=("Other",))
    for consultation in (group, done, other):
        await store.create(consultation)
    await store.add_facts("tg:11@tg:-100", "tg:11", ["Lives in Riga"], at=1.0)
    assert await store.forget_memory("tg:11") == 1
    for forgotten in (group, done):
        found = await store.get(forgotten.id)
        assert found is not None
        assert (found.memory_owner, found.memory_facts, found.person) == (None, (), "tg:11")
    kept = await store.get(other.id)
    assert kept is not None and kept.memory_facts == ("Other",)
    await store.forget_person_memory("api:u", AuditEntry(1.0, "op", "forget_memory", "api:u"))
    kept = await store.get(other.id)
    assert kept is not None and (kept.memory_owner, kept.memory_facts) == ("api:u@x", ("Other",))


INSERT_OLD = (
    "INSERT INTO consultations (id, chat_key, status, max_rounds, initial_request,"
    " created_at, last_activity_at, started_by, memory_owner)"
    " VALUES ($1, $2, 'complete', 1, 'q', $3, $3, $4, $5)"
)
OLD_ROWS = [
    # id, chat_key, created_at, started_by, memory_owner
    ("group", "tg:-100", 1.0, 11, "tg:11@tg:-100"),
    ("private", "tg:12", 2.0, 12, "tg:12"),
    ("memory-off", "tg:13", 3.0, 13, None),
    ("api", "api:s-1", 4.0, None, "api:u@x"),
    ("api-no-memory", "api:s-2", 5.0, None, None),
    ("terminal", "console:local", 6.0, None, "console:local"),
    ("anonymous-admin", "tg:-101", 7.0, ANONYMOUS_ADMIN_ID, None),
]
DERIVED = {
    "group": "tg:11",
    "private": "tg:12",
    "memory-off": "tg:13",
    "api": "api:u@x",  # an API userId may hold `@`: the owner is the person
    "api-no-memory": None,
    "terminal": "console:local",
    "anonymous-admin": None,  # the account every group's anonymous admins write as
}


async def derived(store: Store) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for row in OLD_ROWS:
        consultation = await store.get(row[0])
        assert consultation is not None
        found[row[0]] = consultation.person
    return found


async def test_sqlite_migration_gives_stored_rows_the_person_they_are_known_by(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    async with aiosqlite.connect(path, isolation_level=None) as db:
        before = [m for m in sqlite_schema.MIGRATIONS if m.__name__ < MIGRATION]
        await sqlite_schema.migrate(db, before)
        await db.executemany(INSERT_OLD.replace("$", "?"), OLD_ROWS)
    store = await SqliteStore.open(path)
    try:
        assert await derived(store) == DERIVED
        listed = await store.list_consultations(ConsultationQuery(person="tg:11"))
        assert [row.id for row in listed] == ["group"]
    finally:
        await store.close()


async def test_postgres_migration_gives_stored_rows_the_person_they_are_known_by() -> None:
    async with fresh_schema() as url:
        connection = await asyncpg.connect(url)
        try:
            before = [m for m in postgres_schema.MIGRATIONS if m[0] < MIGRATION]
            await postgres_schema.apply_migrations(connection, before)
            await connection.executemany(INSERT_OLD, OLD_ROWS)
        finally:
            await connection.close()
        store = await PostgresStore.open(url, pool_size=2)
        try:
            assert await derived(store) == DERIVED
            listed = await store.list_consultations(ConsultationQuery(person="tg:11"))
            assert [row.id for row in listed] == ["group"]
        finally:
            await store.close()
