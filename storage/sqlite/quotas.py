"""Quotas on SQLite (`core.domain.quotas`): consultations started per person and UTC day, the
turns' token holds (`core.turns.quota_holds`), and the admins' overrides.

Invariants:
- A start is counted by an UPSERT in the transaction that creates its consultation, so
  it is counted exactly when the consultation is stored; with a limit the UPSERT adds
  only below it, so the check and the count are one write.
- A hold is read and stored in one write transaction: the store has one writer, so no
  other hold or charge comes between the standing read and the hold.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from core.domain.quotas import QuotaOverride, Standing, StartRefused, TokenHold
from storage.sqlite.placeholders import sqlite_sql
from storage.statements.quotas import (
    RELEASE_HOLD,
    RESIZE_HOLD,
    SELECT_OVERRIDE,
    STARTED,
    UPSERT_OVERRIDE,
)

_COUNT_START = (
    "INSERT INTO consultation_starts (person, day, started) VALUES (?, ?, 1)"
    " ON CONFLICT (person, day) DO UPDATE SET started = started + 1"
)
_COUNT_START_WITHIN = (
    "INSERT INTO consultation_starts (person, day, started) VALUES (?, ?, 1)"
    " ON CONFLICT (person, day) DO UPDATE SET started = started + 1 WHERE started < ?"
    " RETURNING started"
)
_CHARGED = (
    "SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM usage_daily"
    " WHERE scope_kind = ? AND scope_key = ? AND day BETWEEN ? AND ?"
)
_HELD = {
    "person": "SELECT COALESCE(SUM(tokens), 0) FROM quota_holds"
    " WHERE person = ? AND day BETWEEN ? AND ? AND expires_at > ?",
    "client": "SELECT COALESCE(SUM(tokens), 0) FROM quota_holds"
    " WHERE client = ? AND day BETWEEN ? AND ? AND expires_at > ?",
}


def count_start(db: sqlite3.Connection, person: str, day: str, limit: int = 0) -> None:
    """Add one to the person's consultations started that day (in the caller's
    transaction); with a `limit` (0: none) only below it, else `StartRefused`."""
    if not limit:
        db.execute(_COUNT_START, (person, day))
        return
    if db.execute(_COUNT_START_WITHIN, (person, day, limit)).fetchone() is None:
        raise StartRefused(consultations_started(db, person, day))


def _used(db: sqlite3.Connection, scope: str, key: str, since: str, until: str, now: float) -> int:
    """Tokens charged to the scope's key over the days, plus its live holds."""
    charged = db.execute(_CHARGED, (scope, key, since, until)).fetchone()[0]
    held = db.execute(_HELD[scope], (key, since, until, now)).fetchone()[0]
    return int(charged) + int(held)


def hold_tokens(
    db: sqlite3.Connection,
    hold: TokenHold,
    month: str,
    now: float,
    admit: Callable[[Standing], bool],
) -> tuple[Standing, bool]:
    """The standing with the live holds, and the hold stored if `admit` says so (in the
    writer's transaction: nothing comes between)."""
    day, person, client = hold.day, hold.person, hold.client
    db.execute("DELETE FROM quota_holds WHERE expires_at <= ?", (now,))
    standing = Standing(
        tokens_today=_used(db, "person", person, day, day, now) if person else 0,
        tokens_month=_used(db, "person", person, month, day, now) if person else 0,
        consultations_today=consultations_started(db, person, day) if person else 0,
        client_tokens_today=_used(db, "client", client, day, day, now) if client else 0,
    )
    if not admit(standing):
        return standing, False
    db.execute(
        "INSERT INTO quota_holds (id, person, client, day, tokens, expires_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (hold.id, person, client, day, hold.tokens, hold.expires_at),
    )
    return standing, True


_RESIZE_HOLD = sqlite_sql(RESIZE_HOLD)
_RELEASE_HOLD = sqlite_sql(RELEASE_HOLD)
_STARTED = sqlite_sql(STARTED)
_SELECT_OVERRIDE = sqlite_sql(SELECT_OVERRIDE)
_UPSERT_OVERRIDE = sqlite_sql(UPSERT_OVERRIDE)


def resize_hold(db: sqlite3.Connection, hold_id: str, tokens: int, expires_at: float) -> None:
    db.execute(_RESIZE_HOLD, (hold_id, tokens, expires_at))


def release_hold(db: sqlite3.Connection, hold_id: str) -> None:
    db.execute(_RELEASE_HOLD, (hold_id,))


def consultations_started(db: sqlite3.Connection, person: str, day: str) -> int:
    row = db.execute(_STARTED, (person, day)).fetchone()
    return 0 if row is None else int(row[0])


def load_override(db: sqlite3.Connection, person: str) -> QuotaOverride | None:
    row = db.execute(_SELECT_OVERRIDE, (person,)).fetchone()
    return None if row is None else QuotaOverride(person, row[0])


def save_override(db: sqlite3.Connection, override: QuotaOverride, at: float) -> None:
    db.execute(
        _UPSERT_OVERRIDE,
        (override.person, override.daily_tokens, at),
    )


def delete_override(db: sqlite3.Connection, person: str) -> bool:
    return db.execute("DELETE FROM quota_overrides WHERE person = ?", (person,)).rowcount > 0
