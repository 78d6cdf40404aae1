"""The store's people for the console (`list_people`, `person_facts`) and the operator's
actions on a person (`set_person_override`, `set_blocked`, `forget_person_memory`), on
SQLite and PostgreSQL: pages in order without repeats, search as plain text, each change
logged in its own transaction and nothing logged when nothing changed."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import aiosqlite
import asyncpg
import pytest

from core.domain.audit import AuditEntry
from core.domain.consultation import Message, Role, Status, Usage
from core.domain.errors import TurnSuperseded
from core.domain.people import PeopleQuery
from core.domain.quotas import QuotaOverride
from core.domain.usage import CallKind, Charge
from storage.postgres import schema as postgres_schema
from storage.postgres.store import PostgresStore
from storage.sqlite import schema as sqlite_schema
from storage.sqlite.store import SqliteStore
from tests.postgres import fresh_schema
from tests.store_contract import make

if TYPE_CHECKING:
    from app.stores import Store

TODAY = "2026-11-26"
MONTH = "2026-11-01"


def charge(person: str, day: str, tokens: int) -> Charge:
    return Charge(day, f"chat-{person}", "m", CallKind.ROUND, Usage(tokens, 1), 0.0, True, person)


def entry(action: str, target: str) -> AuditEntry:
    return AuditEntry(1.0, "op", action, target)


async def actions(store: Store) -> list[tuple[str, str]]:
    return [(e.action, e.target) for e in await store.audit_log(before_id=None, limit=50)]


async def test_people_are_listed_newest_activity_first_with_their_totals(store: Store) -> None:
    await store.add_usage(
        [
            charge("tg:1", "2026-10-30", 50),  # last month: not in the month's total
            charge("tg:1", "2026-11-20", 100),
            charge("tg:2", TODAY, 10),
            charge("tg:2", TODAY, 5),
            charge("tg:3", "2026-11-25", 7),
            charge("tg:%_", TODAY, 1),
        ]
    )
    await store.save_quota_override(QuotaOverride("tg:3", None), at=1.0)
    query = PeopleQuery(TODAY, MONTH)
    rows = await store.list_people(query)
    assert [r.person for r in rows] == ["tg:%_", "tg:2", "tg:3", "tg:1"]
    two = rows[1]
    assert (two.last_day, two.tokens_today, two.tokens_month, two.override) == (
        TODAY, 17, 17, None,
    )  # fmt: skip
    assert rows[2].override == QuotaOverride("tg:3", None)
    assert (rows[3].tokens_today, rows[3].tokens_month) == (0, 101)
    paged, after = [], None
    while page := await store.list_people(PeopleQuery(TODAY, MONTH, after=after, limit=1)):
        paged += [r.person for r in page]
        after = (page[-1].last_day, page[-1].person)
    assert paged == [r.person for r in rows]
    searched = await store.list_people(PeopleQuery(TODAY, MONTH, search="%_"))
    assert [r.person for r in searched] == ["tg:%_"]  # wildcards are plain text
    assert await store.list_people(PeopleQuery(TODAY, MONTH, search="nobody")) == []


async def test_each_action_is_logged_with_it_and_no_change_logs_nothing(store: Store) -> None:
    person = "tg:5"
    assert await store.set_person_override(person, None, at=1.0, audit=entry("q", person)) is False
    override = QuotaOverride(person, 300)
    assert await store.set_person_override(person, override, at=1.0, audit=entry("q", person))
    assert await store.load_quota_override(person) == override
    assert await store.set_person_override(person, None, at=2.0, audit=entry("q0", person))
    assert await store.load_quota_override(person) is None
    assert await store.set_blocked(person, True, at=1.0, audit=entry("block", person))
    assert not await store.set_blocked(person, True, at=1.0, audit=entry("block", person))
    assert await store.is_blocked(person) and not await store.is_blocked("tg:6")
    assert await store.set_blocked(person, False, at=1.0, audit=entry("unblock", person))
    assert not await store.set_blocked(person, False, at=1.0, audit=entry("unblock", person))
    assert not await store.is_blocked(person)
    await store.add_facts(person, person, ["likes tea"], at=1.0)
    await store.add_facts("tg:-100", person, ["in a group"], at=2.0)
    await store.add_facts("tg:7", "tg:7", ["someone else"], at=3.0)
    assert [f.text for f in await store.person_facts(person, limit=10)] == [
        "in a group",
        "likes tea",
    ]
    assert len(await store.person_facts(person, limit=1)) == 1
    assert await store.forget_person_memory(person, entry("forget", person)) == 2
    assert await store.person_facts(person, limit=10) == []
    assert len(await store.person_facts("tg:7", limit=10)) == 1
    assert await actions(store) == [
        ("forget", person),
        ("unblock", person),
        ("block", person),
        ("q0", person),
        ("q", person),
    ]


async def listed(
    store: Store, search: str = "", after: tuple[str, str] | None = None
) -> list[tuple[str, str, int, int]]:
    rows = await store.list_people(PeopleQuery(TODAY, MONTH, search, after))
    return [(r.person, r.last_day, r.tokens_today, r.tokens_month) for r in rows]


async def test_every_write_that_charges_moves_its_person_on_the_list(store: Store) -> None:
    """A reply's charge, a follow-up's and usage added alone each list their person at the
    latest day charged (an older day charged later leaves it); a reply not stored, or a
    charge without a person, lists no one."""
    asked = make("tg:10")
    await store.create(asked)
    await store.record_reply(
        asked.id,
        Message(Role.ASSISTANT, "Which load?", 1001.0),
        expected_round=0,
        current_round=1,
        status=Status.ACTIVE,
        last_activity_at=1001.0,
        charge=charge("tg:10", "2026-11-20", 100),
    )
    with pytest.raises(TurnSuperseded):
        await store.record_reply(
            asked.id,
            Message(Role.ASSISTANT, "Too late", 1002.0),
            expected_round=0,
            current_round=1,
            status=Status.ACTIVE,
            last_activity_at=1002.0,
            charge=charge("tg:12", TODAY, 100),
        )
    assert await listed(store) == [("tg:10", "2026-11-20", 0, 101)]
    await store.add_usage([charge("tg:10", "2026-11-25", 10), charge("tg:10", "2026-11-02", 10)])
    await store.add_usage([charge("tg:10", "2026-10-31", 10)])
    done = make("tg:11")
    await store.create(done)
    await store.record_reply(
        done.id,
        Message(Role.ASSISTANT, "Final answer", 1001.0),
        expected_round=0,
        current_round=1,
        status=Status.COMPLETE,
        last_activity_at=1001.0,
    )
    await store.record_follow_up(
        done.id,
        Message(Role.ASSISTANT, "Back it up nightly.", 1010.0),
        expected_follow_ups=0,
        last_activity_at=1010.0,
        charge=charge("tg:11", TODAY, 5),
    )
    await store.add_usage([Charge(TODAY, "tg:-100", "m", CallKind.ROUND, Usage(1, 1), 0.0, True)])
    assert await listed(store) == [
        ("tg:11", TODAY, 6, 6),
        ("tg:10", "2026-11-25", 0, 123),
    ]
    assert await listed(store, search="1", after=(TODAY, "tg:11")) == [
        ("tg:10", "2026-11-25", 0, 123)
    ]


USAGE_ROWS = [
    ("person", "tg:1", "2026-11-20", "m", "round", 5, 1),
    ("person", "tg:1", "2026-11-24", "m", "final", 7, 1),
    ("person", "tg:2", TODAY, "m", "round", 3, 1),
    ("chat", "tg:3", TODAY, "m", "round", 9, 1),  # a chat, not a person
]
INSERT_USAGE = (
    "INSERT INTO usage_daily (scope_kind, scope_key, day, model, kind, prompt_tokens,"
    " completion_tokens, calls, estimated_calls, cost) VALUES ($1, $2, $3, $4, $5, $6, $7,"
    " 1, 0, 0.0)"
)
BACK_FILLED = [("tg:2", TODAY, 4, 4), ("tg:1", "2026-11-24", 0, 14)]


async def test_sqlite_migration_lists_the_people_charged_before_it(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    async with aiosqlite.connect(path, isolation_level=None) as db:
        before = [m for m in sqlite_schema.MIGRATIONS if m.__name__ < "m022"]
        await sqlite_schema.migrate(db, before)
        await db.executemany(re.sub(r"\$[0-9]", "?", INSERT_USAGE), USAGE_ROWS)
    store = await SqliteStore.open(path)
    try:
        assert await listed(store) == BACK_FILLED
    finally:
        await store.close()


async def test_postgres_migration_lists_the_people_charged_before_it() -> None:
    async with fresh_schema() as url:
        connection = await asyncpg.connect(url)
        try:
            before = [m for m in postgres_schema.MIGRATIONS if m[0] < "m022"]
            await postgres_schema.apply_migrations(connection, before)
            await connection.executemany(INSERT_USAGE, USAGE_ROWS)
        finally:
            await connection.close()
        store = await PostgresStore.open(url, pool_size=2)
        try:
            assert await listed(store) == BACK_FILLED
        finally:
            await store.close()


async def test_postgres_start_lists_people_charged_by_a_previous_release() -> None:
    """In a rolling restart, workers of the release before `person_activity` still charge
    people without listing them; each start lists the people charged yesterday or today."""
    today = datetime.now(UTC).date()
    yesterday, old = (today - timedelta(days=n) for n in (1, 5))
    async with fresh_schema() as url:
        store = await PostgresStore.open(url, pool_size=2)
        await store.close()
        connection = await asyncpg.connect(url)
        try:  # written as a previous release's worker writes: no person_activity
            await connection.executemany(
                INSERT_USAGE,
                [
                    ("person", "tg:21", today.isoformat(), "m", "round", 3, 1),
                    ("person", "tg:22", yesterday.isoformat(), "m", "round", 3, 1),
                    ("person", "tg:23", old.isoformat(), "m", "round", 3, 1),
                ],
            )
        finally:
            await connection.close()
        store = await PostgresStore.open(url, pool_size=2)
        try:
            found = await store.list_people(PeopleQuery(today.isoformat(), MONTH, "", None))
            assert [(r.person, r.last_day) for r in found] == [
                ("tg:21", today.isoformat()),
                ("tg:22", yesterday.isoformat()),
            ]
        finally:
            await store.close()
