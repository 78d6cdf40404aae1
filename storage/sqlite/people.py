"""The console's people (`core.domain.people`) and the operator's actions on one person on
SQLite: each action and its audit entry in one transaction.

Invariant: a page of the list reads `person_activity` through its index (last day
charged, newest first, then key) from where the previous page ended, so its cost is the
page's, not the history's; each person's tokens are added up from their usage rows of
this month only (a range of the usage table's primary key), and the day's starts and the
override are looked up by key, all for the page's people only.
"""

from __future__ import annotations

import sqlite3

from core.domain.audit import AuditEntry
from core.domain.facts import Fact
from core.domain.people import PeopleQuery, PersonRow
from core.domain.quotas import QuotaOverride
from storage.sqlite import memory, quotas
from storage.sqlite.admin import add_audit
from storage.sqlite.placeholders import sqlite_sql
from storage.statements.people import IS_BLOCKED

_TOKENS = "SUM(prompt_tokens + completion_tokens) FROM usage_daily"
_OF_PERSON = "WHERE scope_kind = 'person' AND scope_key = a.person"


def _people(after: bool) -> str:
    """The page's statement; after a page, from the (last day, key) it ended at: the
    days up to that one seek the index, the rest of the key is a filter."""
    where = (
        " AND a.last_day <= :after_day AND (a.last_day < :after_day OR a.person > :after_key)"
        if after
        else ""
    )
    return (
        "SELECT a.person, a.last_day,"
        f" (SELECT {_TOKENS} {_OF_PERSON} AND day = :today),"
        f" (SELECT {_TOKENS} {_OF_PERSON} AND day >= :month),"
        " s.started, o.person IS NOT NULL, o.daily_tokens"
        " FROM person_activity a INDEXED BY person_activity_recent"
        " LEFT JOIN consultation_starts s ON s.person = a.person AND s.day = :today"
        " LEFT JOIN quota_overrides o ON o.person = a.person"
        f" WHERE instr(a.person, :search) > 0{where}"
        " ORDER BY a.last_day DESC, a.person LIMIT :limit"
    )


_FIRST_PAGE = _people(after=False)
_NEXT_PAGE = _people(after=True)
_FACTS = (
    "SELECT id, text, created_at FROM memory_facts INDEXED BY memory_facts_person"
    " WHERE person = ? ORDER BY id DESC LIMIT ?"
)


def list_people(db: sqlite3.Connection, query: PeopleQuery) -> list[PersonRow]:
    after_day, after_key = query.after if query.after is not None else (None, None)
    rows = db.execute(
        _FIRST_PAGE if query.after is None else _NEXT_PAGE,
        {
            "today": query.today,
            "month": query.month_start,
            "search": query.search,
            "after_day": after_day,
            "after_key": after_key,
            "limit": query.limit,
        },
    ).fetchall()
    return [
        PersonRow(
            str(person),
            str(last_day),
            int(today or 0),
            int(month or 0),
            int(started or 0),
            QuotaOverride(str(person), daily_tokens) if overridden else None,
        )
        for person, last_day, today, month, started, overridden, daily_tokens in rows
    ]


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


_IS_BLOCKED = sqlite_sql(IS_BLOCKED)


def is_blocked(db: sqlite3.Connection, person: str) -> bool:
    return db.execute(_IS_BLOCKED, (person,)).fetchone() is not None


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
