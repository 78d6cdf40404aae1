"""What both stores keep of the tools a reply called (`Message.tool_uses`, m029): written
with a round, a final answer, a follow-up's answer, many replies at once and a
consultation created whole, read back exactly by every load (a failure, its kind, a NUL
and non-Latin text included); rows written before the migration read with none, and a
damaged value reads as none."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import aiosqlite
import asyncpg

from core.domain.consultation import Message, Role, Status, TurnRecord
from core.domain.outcomes import replay_of
from core.domain.tools import ToolFailure, ToolUse
from storage.postgres import schema as postgres_schema
from storage.postgres.store import PostgresStore
from storage.sqlite import schema as sqlite_schema
from storage.sqlite.store import SqliteStore
from tests.postgres import fresh_schema
from tests.store_contract import StoreKind, make

if TYPE_CHECKING:
    from app.stores import Store

MIGRATION = "m029_tool_uses"
TIME = ToolUse(
    name="time__get_current_time",
    server="time",
    tool="get_current_time",
    arguments='{"timezone": "Europe/Paris"}',
    result='{"timezone": "Europe/Paris", "datetime": "2026-11-29T03:00:00+01:00"}',
    ms=12,
)
HUNG = ToolUse(
    name="docs__search",
    server="docs",
    tool="search",
    arguments='{"query": "гарантия\\u0000"}',
    error="the tool did not answer within 20 s",
    failure=ToolFailure.TIMEOUT,
    ms=20_000,
)
ODD = ToolUse(
    name="docs__read",
    server="docs",
    tool="read",
    arguments="not json {",
    result="line 1\nline 2 \x00 «quoted» 😀",
    ms=3,
)


async def test_tool_uses_are_kept_with_every_reply_and_read_back_exactly(store: Store) -> None:
    """record_reply (a round, then the final answer) and record_follow_up keep each
    reply's tool uses in order with every field; get, load_latest and load_turn read them
    back; user messages have none; a replayed turn hands them back."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0, turn_id="tg:1")])
    await store.create(consultation)
    asked = Message(Role.ASSISTANT, "Which city?", 2.0, tool_uses=(TIME,))
    await store.record_reply(
        consultation.id,
        asked,
        expected_round=0,
        current_round=1,
        status=Status.ACTIVE,
        last_activity_at=2.0,
    )
    await store.add_message(
        consultation.id, Message(Role.USER, "Paris", 3.0, turn_id="tg:2"), last_activity_at=3.0
    )
    final = Message(Role.ASSISTANT, "It is 3 a.m.", 4.0, tool_uses=(TIME, HUNG, ODD))
    await store.record_reply(
        consultation.id,
        final,
        expected_round=1,
        current_round=2,
        status=Status.COMPLETE,
        last_activity_at=4.0,
    )
    await store.add_message(consultation.id, Message(Role.USER, "And?", 5.0), last_activity_at=5.0)
    follow_up = Message(Role.ASSISTANT, "Still 3 a.m.", 6.0, tool_uses=(HUNG,))
    await store.record_follow_up(
        consultation.id, follow_up, expected_follow_ups=0, last_activity_at=6.0
    )

    expected = [(), (TIME,), (), (TIME, HUNG, ODD), (), (HUNG,)]
    for loaded in (await store.get(consultation.id), await store.load_latest("chat:1")):
        assert loaded is not None
        assert [m.tool_uses for m in loaded.messages] == expected
    found, _ = await store.load_turn("chat:1", "tg:2")
    assert found is not None and found.reply == final
    assert replay_of(found, model="m").tool_uses == (TIME, HUNG, ODD)


async def test_replies_written_together_each_keep_their_own_tool_uses(store: Store) -> None:
    """Many chats answered at once (one statement for them on PostgreSQL), and a
    consultation created with its messages: each reply keeps its own tool uses."""
    chats = [make(f"tg:tools:{n}", at=float(n)) for n in range(6)]
    for consultation in chats:
        await store.create(consultation)
    used = [(TIME,) if n % 2 else (HUNG, TIME) for n in range(6)]
    await asyncio.gather(
        *(
            store.record_reply(
                c.id,
                Message(Role.ASSISTANT, f"answer {n}", 50.0, tool_uses=used[n]),
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
        assert loaded is not None and loaded.messages[-1].tool_uses == used[n]

    created = make(
        "tg:tools:created",
        messages=[
            Message(Role.USER, "q", 1.0),
            Message(Role.ASSISTANT, "a", 2.0, tool_uses=(ODD, HUNG)),
        ],
        current_round=1,
        status=Status.COMPLETE,
    )
    await store.create(created)
    assert await store.get(created.id) == created


async def test_a_damaged_value_reads_as_no_tool_uses(
    store: Store, kind: StoreKind, database: str
) -> None:
    """A value that is no list of tool uses (written behind the store) fails no read; a
    failure kind this version does not know reads as a failed call."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0)])
    await store.create(consultation)
    await store.record_reply(
        consultation.id,
        Message(Role.ASSISTANT, "a", 2.0, tool_uses=(TIME,)),
        expected_round=0,
        current_round=1,
        status=Status.COMPLETE,
        last_activity_at=2.0,
    )
    for damaged in ('[{"name": 1', '{"name": "x"}', '[{"server": "no name"}]', "[[1]]"):
        await kind.execute(database, f"UPDATE messages SET tool_uses = '{damaged}'")
        loaded = await store.get(consultation.id)
        assert loaded is not None and [m.tool_uses for m in loaded.messages] == [(), ()]
    await kind.execute(
        database,
        'UPDATE messages SET tool_uses = \'[{"name": "a__b", "failure": "melted",'
        ' "error": "gone"}]\' WHERE role = \'assistant\'',
    )
    loaded = await store.get(consultation.id)
    assert loaded is not None
    assert loaded.messages[-1].tool_uses == (
        ToolUse("a__b", "", "", "", error="gone", failure=ToolFailure.FAILED),
    )


INSERT_CONSULTATION = (
    "INSERT INTO consultations (id, chat_key, status, max_rounds, current_round,"
    " initial_request, options, created_at, last_activity_at, last_seq)"
    " VALUES ('old', 'tg:1', 'complete', 1, 1, 'Hi', '{}', 1, 2, 2)"
)
INSERT_MESSAGE = (
    "INSERT INTO messages (consultation_id, seq, role, text, created_at, turn_id)"
    " VALUES ('old', $1, $2, $3, $4, $5)"
)
OLD_MESSAGES = [(1, "user", "Hi", 1.0, "tg:old"), (2, "assistant", "The answer", 2.0, None)]


async def rows_before_read_with_none(store: SqliteStore | PostgresStore) -> None:
    loaded = await store.get("old")
    assert loaded is not None
    assert [(m.text, m.tool_uses) for m in loaded.messages] == [("Hi", ()), ("The answer", ())]
    found, _ = await store.load_turn("tg:1", "tg:old")
    assert isinstance(found, TurnRecord) and replay_of(found, model="m").tool_uses == ()


async def test_an_sqlite_file_before_the_migration_reads_its_replies_with_no_tool_uses(
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


async def test_a_postgresql_database_before_the_migration_reads_its_replies_with_no_tool_uses() -> (
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
