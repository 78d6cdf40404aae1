"""The console's people (`core.people`) and the operator's actions on one person on
SQLite: each action and its audit entry in one transaction.

Invariant: a page of the list is one aggregate query over the usage table's person
scope (its primary key's range), with the day's starts and the overrides looked up by
their keys for the page's people only.
"""

from __future__ import annotations

import sqlite3

from core.audit import AuditEntry
from core.memory import Fact
from core.people import PeopleQuery, PersonRow
from core.quotas import QuotaOverride
from storage.sqlite import memory, quotas
from storage.sqlite.admin import add_audit

_PEOPLE = (
    "SELECT scope_key, MAX(day) AS last_day,"
    " SUM(CASE WHEN day = :today THEN prompt_tokens + completion_tokens ELSE 0 END),"
    " SUM(CASE WHEN day >= :month THEN prompt_tokens + completion_tokens ELSE 0 END)"
    " FROM usage_daily WHERE scope_kind = 'person' AND instr(scope_key, :search) > 0"
    " GROUP BY scope_key"
    " HAVING :after_day IS NULL OR MAX(day) < :after_day"
    " OR (MAX(day) = :after_day AND scope_key > :after_key)"
    " ORDER BY last_day DESC, scope_key LIMIT :limit"
)
_STARTED = "SELECT started FROM consultation_starts WHERE person = ? AND day = ?"
_OVERRIDE = "SELECT daily_tokens FROM quota_overrides WHERE person = ?"
_FACTS = (
    "SELECT id, text, created_at FROM memory_facts INDEXED BY memory_facts_person"
    " WHERE person = ? ORDER BY id DESC LIMIT ?"
)


def list_people(db: sqlite3.Connection, query: PeopleQuery) -> list[PersonRow]:
    after_day, after_key = query.after if query.after is not None else (None, None)
    rows = db.execute(
        _PEOPLE,
        {
            "today": query.today,
            "month": query.month_start,
            "search": query.search,
            "after_day": after_day,
            "after_key": after_key,
            "limit": query.limit,
        },
    ).fetchall()
    people = []
    for person, last_day, today, month in rows:
        started = db.execute(_STARTED, (person, query.today)).fetchone()
        override = db.execute(_OVERRIDE, (person,)).fetchone()
        people.append(
            PersonRow(
                str(person),
                str(last_day),
                int(today or 0),
                int(month or 0),
                0 if started is None else int(started[0]),
                None if override is None else QuotaOverride(str(person), override[0]),
            )
        )
    return people


def person_facts(db: sqlite3.Connection, person: str, limit: int) -> list[Fact]:
    return [Fact(*row) for row in db.execute(_FACTS, (person, limit))]


def set_override(
    db: sqlite3.Connection,
    person: str,
    override: QuotaOverride | None,
    at: float,
    audit: AuditEntry,
) -> bool:
    """Set the override, or remove it (None); logged when something changed."""
    if override is None:
        changed = quotas.delete_override(db, person)
    else:
        quotas.save_override(db, override, at)
        changed = True
    if changed:
        add_audit(db, audit)
    return changed


def forget_memory(db: sqlite3.Connection, person: str, audit: AuditEntry) -> int:
    """Delete the person's facts and preferences as /forget does; always logged."""
    deleted = memory.forget_memory(db, person)
    add_audit(db, audit)
    return deleted


def is_blocked(db: sqlite3.Connection, person: str) -> bool:
    return (
        db.execute("SELECT 1 FROM blocked_people WHERE person = ?", (person,)).fetchone()
        is not None
    )


def set_blocked(
    db: sqlite3.Connection, person: str, blocked: bool, at: float, audit: AuditEntry
) -> bool:
    """Block or unblock; logged when something changed."""
    if blocked:
        changed = db.execute(
            "INSERT INTO blocked_people (person, blocked_at) VALUES (?, ?)"
            " ON CONFLICT (person) DO NOTHING",
            (person, at),
        ).rowcount
    else:
        changed = db.execute("DELETE FROM blocked_people WHERE person = ?", (person,)).rowcount
    if changed:
        add_audit(db, audit)
    return changed > 0
