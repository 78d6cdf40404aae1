"""Client memory on SQLite: facts per owner and preferences per person (memory on or off,
the interface language).

Invariants (with `core.domain.facts`): an owner holds at most `MAX_FACTS` facts, the newest by
id (ids are never reused: AUTOINCREMENT), none equal to another ignoring case and spacing;
adding facts is one transaction on the single writer, so two additions never interleave.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from core.domain.facts import MAX_FACTS, Fact, MemoryPreferences, MemoryState, distinct_facts
from storage.sqlite.placeholders import sqlite_sql
from storage.statements.memory import (
    DELETE_LANGUAGE,
    DELETE_PREFERENCES,
    FACTS_OF,
    FORGET_IN_CONSULTATIONS,
    SELECT_LANGUAGE,
    SELECT_PREFERENCES,
    TRIM_FACTS,
    UPSERT_LANGUAGE,
    UPSERT_PREFERENCES,
)
from storage.statements.tool_usage import DELETE_PERSON_TOOL_CALLS

_FACTS_OF = sqlite_sql(FACTS_OF)
_TRIM_FACTS = sqlite_sql(TRIM_FACTS)
_FORGET_IN_CONSULTATIONS = sqlite_sql(FORGET_IN_CONSULTATIONS)
_SELECT_PREFERENCES = sqlite_sql(SELECT_PREFERENCES)
_UPSERT_PREFERENCES = sqlite_sql(UPSERT_PREFERENCES)
_DELETE_PREFERENCES = sqlite_sql(DELETE_PREFERENCES)
_SELECT_LANGUAGE = sqlite_sql(SELECT_LANGUAGE)
_UPSERT_LANGUAGE = sqlite_sql(UPSERT_LANGUAGE)
_DELETE_LANGUAGE = sqlite_sql(DELETE_LANGUAGE)
_DELETE_TOOL_CALLS = sqlite_sql(DELETE_PERSON_TOOL_CALLS)


# -- reads ---------------------------------------------------------------------------------


def load_memory(db: sqlite3.Connection, owner: str, person: str) -> MemoryState:
    facts = tuple(Fact(*row) for row in db.execute(_FACTS_OF, (owner, MAX_FACTS)))
    row = db.execute(_SELECT_PREFERENCES, (person,)).fetchone()
    preferences = MemoryPreferences() if row is None else MemoryPreferences(*map(bool, row))
    return MemoryState(facts, preferences)


# -- writes --------------------------------------------------------------------------------


def add_facts(
    db: sqlite3.Connection, owner: str, person: str, facts: Sequence[str], at: float
) -> tuple[Fact, ...]:
    """Insert the facts `owner` lacks, drop the oldest past `MAX_FACTS`; the ones added,
    newest first."""
    known = [row[1] for row in db.execute(_FACTS_OF, (owner, MAX_FACTS))]
    added: list[Fact] = []
    for text in distinct_facts(facts, known=known):
        cursor = db.execute(
            "INSERT INTO memory_facts (owner, person, text, created_at) VALUES (?, ?, ?, ?)",
            (owner, person, text.replace("\x00", ""), at),
        )
        assert cursor.lastrowid is not None
        added.append(Fact(cursor.lastrowid, text.replace("\x00", ""), at))
    db.execute(_TRIM_FACTS, (owner, MAX_FACTS))
    return tuple(reversed(added))


def delete_fact(db: sqlite3.Connection, owner: str, fact_id: int) -> bool:
    cursor = db.execute("DELETE FROM memory_facts WHERE owner = ? AND id = ?", (owner, fact_id))
    return cursor.rowcount > 0


def save_preferences(db: sqlite3.Connection, person: str, p: MemoryPreferences) -> None:
    db.execute(
        _UPSERT_PREFERENCES,
        (person, p.enabled, p.notice_given, time.time()),
    )


def forget_memory(db: sqlite3.Connection, person: str) -> int:
    """Delete the person's facts, preferences, language and tool calls by day, and the
    facts their consultations still kept (`FORGET_IN_CONSULTATIONS`); how many facts went."""
    deleted = db.execute("DELETE FROM memory_facts WHERE person = ?", (person,)).rowcount
    db.execute(_FORGET_IN_CONSULTATIONS, (person,))
    db.execute(_DELETE_PREFERENCES, (person,))
    db.execute(_DELETE_LANGUAGE, (person,))
    db.execute(_DELETE_TOOL_CALLS, (person,))
    return int(deleted)


def load_language(db: sqlite3.Connection, person: str) -> str | None:
    row = db.execute(_SELECT_LANGUAGE, (person,)).fetchone()
    return None if row is None else str(row[0])


def delete_language(db: sqlite3.Connection, person: str) -> bool:
    cursor = db.execute(_DELETE_LANGUAGE, (person,))
    return cursor.rowcount > 0


def save_language(db: sqlite3.Connection, person: str, language: str) -> None:
    db.execute(
        _UPSERT_LANGUAGE,
        (person, language, time.time()),
    )
