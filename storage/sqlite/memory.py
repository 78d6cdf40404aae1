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
from storage.shared import FORGET_IN_CONSULTATIONS

_FACTS_OF = "SELECT id, text, created_at FROM memory_facts WHERE owner = ? ORDER BY id DESC LIMIT ?"


# -- reads ---------------------------------------------------------------------------------


def load_memory(db: sqlite3.Connection, owner: str, person: str) -> MemoryState:
    facts = tuple(Fact(*row) for row in db.execute(_FACTS_OF, (owner, MAX_FACTS)))
    row = db.execute(
        "SELECT enabled, notice_given FROM memory_preferences WHERE person = ?", (person,)
    ).fetchone()
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
    db.execute(
        "DELETE FROM memory_facts WHERE owner = ? AND id NOT IN"
        " (SELECT id FROM memory_facts WHERE owner = ? ORDER BY id DESC LIMIT ?)",
        (owner, owner, MAX_FACTS),
    )
    return tuple(reversed(added))


def delete_fact(db: sqlite3.Connection, owner: str, fact_id: int) -> bool:
    cursor = db.execute("DELETE FROM memory_facts WHERE owner = ? AND id = ?", (owner, fact_id))
    return cursor.rowcount > 0


def save_preferences(db: sqlite3.Connection, person: str, p: MemoryPreferences) -> None:
    db.execute(
        "INSERT INTO memory_preferences (person, enabled, notice_given, updated_at)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (person) DO UPDATE SET enabled = excluded.enabled,"
        " notice_given = excluded.notice_given, updated_at = excluded.updated_at",
        (person, p.enabled, p.notice_given, time.time()),
    )


def forget_memory(db: sqlite3.Connection, person: str) -> int:
    """Delete the person's facts, preferences and language, and the facts their
    consultations still kept (`FORGET_IN_CONSULTATIONS`); how many facts went."""
    deleted = db.execute("DELETE FROM memory_facts WHERE person = ?", (person,)).rowcount
    db.execute(FORGET_IN_CONSULTATIONS.replace("$", "?"), (person,))
    db.execute("DELETE FROM memory_preferences WHERE person = ?", (person,))
    db.execute("DELETE FROM person_languages WHERE person = ?", (person,))
    return int(deleted)


def load_language(db: sqlite3.Connection, person: str) -> str | None:
    row = db.execute("SELECT language FROM person_languages WHERE person = ?", (person,)).fetchone()
    return None if row is None else str(row[0])


def delete_language(db: sqlite3.Connection, person: str) -> bool:
    cursor = db.execute("DELETE FROM person_languages WHERE person = ?", (person,))
    return cursor.rowcount > 0


def save_language(db: sqlite3.Connection, person: str, language: str) -> None:
    db.execute(
        "INSERT INTO person_languages (person, language, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (person) DO UPDATE SET language = excluded.language,"
        " updated_at = excluded.updated_at",
        (person, language, time.time()),
    )
