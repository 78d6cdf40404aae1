"""Quotas on SQLite (`core.quotas`): consultations started per person and UTC day, and the
admins' overrides.

Invariant: a start is counted by an UPSERT in the transaction that creates its
consultation, so it is counted exactly when the consultation is stored.
"""

from __future__ import annotations

import sqlite3

from core.quotas import QuotaOverride

_COUNT_START = (
    "INSERT INTO consultation_starts (person, day, started) VALUES (?, ?, 1)"
    " ON CONFLICT (person, day) DO UPDATE SET started = started + 1"
)


def count_start(db: sqlite3.Connection, person: str, day: str) -> None:
    """Add one to the person's consultations started that day (in the caller's transaction)."""
    db.execute(_COUNT_START, (person, day))


def consultations_started(db: sqlite3.Connection, person: str, day: str) -> int:
    row = db.execute(
        "SELECT started FROM consultation_starts WHERE person = ? AND day = ?", (person, day)
    ).fetchone()
    return 0 if row is None else int(row[0])


def load_override(db: sqlite3.Connection, person: str) -> QuotaOverride | None:
    row = db.execute(
        "SELECT daily_tokens FROM quota_overrides WHERE person = ?", (person,)
    ).fetchone()
    return None if row is None else QuotaOverride(person, row[0])


def save_override(db: sqlite3.Connection, override: QuotaOverride, at: float) -> None:
    db.execute(
        "INSERT INTO quota_overrides (person, daily_tokens, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (person) DO UPDATE SET daily_tokens = excluded.daily_tokens,"
        " updated_at = excluded.updated_at",
        (override.person, override.daily_tokens, at),
    )


def delete_override(db: sqlite3.Connection, person: str) -> bool:
    return db.execute("DELETE FROM quota_overrides WHERE person = ?", (person,)).rowcount > 0
