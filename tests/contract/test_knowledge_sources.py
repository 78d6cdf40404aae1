"""What both stores keep of the knowledge-base passages an answer cited
(`Message.knowledge_sources`, m027): written with a final answer, a follow-up's answer,
many replies at once and a consultation created whole, read back by every load; rows
written before the migration read with none, and a damaged value reads as none."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import aiosqlite
import asyncpg

from core.domain.consultation import Message, Role, Status
from core.domain.knowledge_sources import KnowledgeSource
from storage.postgres import schema as postgres_schema
from storage.postgres.store import PostgresStore
from storage.sqlite import schema as sqlite_schema
from storage.sqlite.store import SqliteStore
from tests.postgres import fresh_schema
from tests.store_contract import StoreKind, make

if TYPE_CHECKING:
    from app.stores import Store

MIGRATION = "m027_knowledge_sources"
WARRANTY = KnowledgeSource("K1", 7, "Warranty terms", "Kettles › Limescale", 3, "Two years…")
FAQ = KnowledgeSource("K3", 9, "FAQ «returns»", "", None, "Returns within 30 days.")


async def test_cited_sources_are_kept_with_the_answer_and_the_follow_ups_answer(
    store: Store,
) -> None:
    """record_reply and record_follow_up keep each answer's sources, in order, with every
    field; get, load_latest and load_turn read them back; other messages have none."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0, turn_id="tg:1")])
    await store.create(consultation)
    final = Message(Role.ASSISTANT, "Two years [K1], see [K3].", 2.0)
    final.knowledge_sources = (WARRANTY, FAQ)
    await store.record_reply(
        consultation.id,
        final,
        expected_round=0,
        current_round=1,
        status=Status.COMPLETE,
        last_activity_at=2.0,
    )
    await store.add_message(consultation.id, Message(Role.USER, "And?", 3.0), last_activity_at=3.0)
    follow_up = Message(Role.ASSISTANT, "Returns [K3].", 4.0, knowledge_sources=(FAQ,))
    await store.record_follow_up(
        consultation.id, follow_up, expected_follow_ups=0, last_activity_at=4.0
    )

    expected = [(), (WARRANTY, FAQ), (), (FAQ,)]
    for loaded in (await store.get(consultation.id), await store.load_latest("chat:1")):
        assert loaded is not None
        assert [m.knowledge_sources for m in loaded.messages] == expected
    found, _ = await store.load_turn("chat:1", "tg:1")
    assert found is not None and found.reply == final


async def test_replies_written_together_each_keep_their_own_sources(store: Store) -> None:
    """Many chats answered at once (one statement for them on PostgreSQL), and a
    consultation created with its messages: each reply keeps its own sources."""
    chats = [make(f"tg:cited:{n}", at=float(n)) for n in range(6)]
    for consultation in chats:
        await store.create(consultation)
    cited = [(WARRANTY,) if n % 2 else (FAQ, WARRANTY) for n in range(6)]
    await asyncio.gather(
        *(
            store.record_reply(
                c.id,
                Message(Role.ASSISTANT, f"answer {n}", 50.0, knowledge_sources=cited[n]),
                expected_round=0,
                current_round=1,
                status=Status.COMPLETE,
                last_activity_at=50.0,
            )
            for n, c in enumerate(chats)
        )
    )
    for n, c in enumerate(chats):
        loaded = await store.get(c.id)
        assert loaded is not None and loaded.messages[-1].knowledge_sources == cited[n]

    created = make(
        "tg:cited:created",
        messages=[
            Message(Role.USER, "q", 1.0),
            Message(Role.ASSISTANT, "a [K1]", 2.0, knowledge_sources=(WARRANTY,)),
        ],
        current_round=1,
        status=Status.COMPLETE,
    )
    await store.create(created)
    assert await store.get(created.id) == created


async def test_a_damaged_value_reads_as_no_sources(
    store: Store, kind: StoreKind, database: str
) -> None:
    """A value that is no list of sources (written behind the store) fails no read."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0)])
    await store.create(consultation)
    await store.record_reply(
        consultation.id,
        Message(Role.ASSISTANT, "a", 2.0, knowledge_sources=(WARRANTY,)),
        expected_round=0,
        current_round=1,
        status=Status.COMPLETE,
        last_activity_at=2.0,
    )
    await kind.execute(database, "UPDATE messages SET knowledge_sources = '[{\"ref\": 1}'")
    loaded = await store.get(consultation.id)
    assert loaded is not None and [m.knowledge_sources for m in loaded.messages] == [(), ()]


INSERT_CONSULTATION = (
    "INSERT INTO consultations (id, chat_key, status, max_rounds, current_round,"
    " initial_request, options, created_at, last_activity_at, last_seq)"
    " VALUES ('old', 'tg:1', 'complete', 1, 1, 'Hi', '{}', 1, 2, 2)"
)
INSERT_MESSAGE = (
    "INSERT INTO messages (consultation_id, seq, role, text, created_at)"
    " VALUES ('old', $1, $2, $3, $4)"
)
OLD_MESSAGES = [(1, "user", "Hi", 1.0), (2, "assistant", "The answer", 2.0)]


async def rows_before_read_with_none(store: SqliteStore | PostgresStore) -> None:
    loaded = await store.get("old")
    assert loaded is not None
    assert [(m.text, m.knowledge_sources) for m in loaded.messages] == [
        ("Hi", ()),
        ("The answer", ()),
    ]


async def test_an_sqlite_file_before_the_migration_reads_its_answers_with_no_sources(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    async with aiosqlite.connect(path, isolation_level=None) as db:
        before = [m for m in sqlite_schema.MIGRATIONS if m.__name__ < MIGRATION]
        await sqlite_schema.migrate(db, before)
        await db.execute(INSERT_CONSULTATION)
        for values in OLD_MESSAGES:
            await db.execute(INSERT_MESSAGE.replace("$", "?"), values)
    store = await SqliteStore.open(path)
    try:
        await rows_before_read_with_none(store)
    finally:
        await store.close()


async def test_a_postgresql_database_before_the_migration_reads_its_answers_with_no_sources() -> (
    None
):
    async with fresh_schema() as url:
        connection = await asyncpg.connect(url)
        try:
            before = [m for m in postgres_schema.MIGRATIONS if m[0] < MIGRATION]
            await postgres_schema.apply_migrations(connection, before)
            await connection.execute(INSERT_CONSULTATION)
            for values in OLD_MESSAGES:
                await connection.execute(INSERT_MESSAGE, *values)
        finally:
            await connection.close()
        store = await PostgresStore.open(url, pool_size=2)
        try:
            await rows_before_read_with_none(store)
        finally:
            await store.close()
