"""Upgrading a database to m010 (a message's clarifying round, a consultation's unsent
picks), on each store: the consultations and messages stored before keep every value,
load with no round and no picks, and take both from then on."""

from __future__ import annotations

from pathlib import Path

import aiosqlite
import asyncpg
import pytest

from core.domain.clarifying import Answer, ClarifyingRound, Picks, Question
from core.domain.consultation import Consultation, Message, Role, Status
from storage.postgres import schema as postgres_schema
from storage.postgres.store import PostgresStore
from storage.sqlite import schema as sqlite_schema
from storage.sqlite.store import SqliteStore
from tests.postgres import postgres_url

__all__ = ["postgres_url"]

MIGRATION = "m010_clarifying_rounds"
ROUND = ClarifyingRound("", (Question("Which workload?", ("Reads", "Writes")),))
PICKS = Picks(2, (Answer(1, 2),))

INSERT_CONSULTATION = (
    "INSERT INTO consultations (id, chat_key, status, max_rounds, current_round,"
    " initial_request, options, created_at, last_activity_at, last_seq)"
    " VALUES ('old', 'tg:1', 'active', 3, 1, 'Hi', '{}', 1, 2, 3)"
)
INSERT_MESSAGE = (
    "INSERT INTO messages (consultation_id, seq, role, author, text, created_at, turn_id)"
    " VALUES ('old', $1, $2, $3, $4, $5, $6)"
)
OLD_MESSAGES = [
    (1, "user", "Ann", "Hi", 1.0, "tg:10"),
    (2, "assistant", None, "Which workload?", 1.5, None),
    (3, "user", "Ann", "Reads", 2.0, "tg:11"),
]


def expected_before() -> Consultation:
    """The consultation the rows above hold, as the store loads it."""
    return Consultation(
        id="old",
        chat_key="tg:1",
        max_rounds=3,
        initial_request="Hi",
        created_at=1.0,
        last_activity_at=2.0,
        current_round=1,
        messages=[
            Message(Role(role), text, at, author=author, turn_id=turn)
            for _, role, author, text, at, turn in OLD_MESSAGES
        ],
    )


async def takes_rounds_and_picks_from_now_on(store: SqliteStore | PostgresStore) -> None:
    """The upgraded consultation loads as it was, then keeps a round and picks."""
    assert await store.get("old") == expected_before()
    await store.record_reply(
        "old",
        Message(Role.ASSISTANT, ROUND.text, 3.0, questions=ROUND),
        expected_round=1,
        current_round=2,
        status=Status.ACTIVE,
        last_activity_at=3.0,
    )
    await store.save_picks("old", PICKS)
    loaded = await store.load_active("tg:1")
    assert loaded is not None
    assert [m.questions for m in loaded.messages] == [None, None, None, ROUND]
    assert loaded.picks == PICKS


async def test_an_sqlite_file_at_m009_migrates_with_its_rows_intact(tmp_path: Path) -> None:
    """A SQLite file at m009 with a consultation and its messages gets m010, rows intact."""
    path = tmp_path / "old.db"
    async with aiosqlite.connect(path, isolation_level=None) as db:
        before = [m for m in sqlite_schema.MIGRATIONS if m.__name__ < MIGRATION]
        await sqlite_schema.migrate(db, before)
        await db.execute(INSERT_CONSULTATION)
        for values in OLD_MESSAGES:
            await db.execute(INSERT_MESSAGE.replace("$", "?"), values)
        later = [m.__name__ for m in sqlite_schema.MIGRATIONS if m.__name__ >= MIGRATION]
        assert await sqlite_schema.migrate(db) == later  # it, then any added after it
    store = await SqliteStore.open(path)
    try:
        await takes_rounds_and_picks_from_now_on(store)
    finally:
        await store.close()


async def test_a_postgresql_database_at_m009_migrates_with_its_rows_intact(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PostgreSQL database at m009 with a consultation and its messages gets m010 when a
    store opens it, rows intact."""
    full = list(postgres_schema.MIGRATIONS)
    monkeypatch.setattr(postgres_schema, "MIGRATIONS", [m for m in full if m[0] < MIGRATION])
    connection = await asyncpg.connect(postgres_url)
    try:
        await postgres_schema.migrate(connection)
        await connection.execute(INSERT_CONSULTATION)
        for values in OLD_MESSAGES:
            await connection.execute(INSERT_MESSAGE, *values)
    finally:
        await connection.close()
    monkeypatch.setattr(postgres_schema, "MIGRATIONS", full)

    store = await PostgresStore.open(postgres_url)  # applies the rest
    try:
        await takes_rounds_and_picks_from_now_on(store)
    finally:
        await store.close()
    connection = await asyncpg.connect(postgres_url)
    try:
        assert MIGRATION in await postgres_schema.applied_migrations(connection)
    finally:
        await connection.close()
