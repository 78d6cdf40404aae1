"""The operator's console on SQLite: the consultation list, console sessions and the audit
log.

Each write is a synchronous function run on the writer's thread inside the transaction
opened by `storage.sqlite.batch`: an action and its audit entry are committed together,
or neither. Every value reaches SQLite as a bound parameter; the only text formatted into
SQL is the fixed fragments written here.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from core.audit import MAX_AUDIT_PAGE, AuditEntry
from core.listing import LIKE_ESCAPE, LISTED_REQUEST_CHARS, ConsultationQuery, ListedConsultation
from storage.shared import listed_from_row
from storage.sqlite.upkeep import VACUUM_PAGES_PER_PURGE, free_pages

# -- reads ---------------------------------------------------------------------------------


def list_consultations(
    db: sqlite3.Connection, query: ConsultationQuery
) -> list[ListedConsultation]:
    """A page of `query`, newest first: one range scan of the index on (created_at, id),
    or on (status, …) or (chat_key, …) when those are filtered."""
    where: list[str] = []
    params: list[Any] = []
    if query.since is not None:
        where.append("created_at >= ?")
        params.append(query.since)
    if query.until is not None:
        where.append("created_at < ?")
        params.append(query.until)
    if query.status is not None:
        where.append("status = ?")
        params.append(query.status.value)
    if query.chat_key is not None:
        where.append("chat_key = ?")
        params.append(query.chat_key)
    pattern = query.like_pattern()
    if pattern is not None:
        where.append(f"initial_request LIKE ? ESCAPE '{LIKE_ESCAPE}'")
        params.append(pattern)
    if query.before is not None:
        where.append("(created_at, id) < (?, ?)")
        params.extend((query.before.created_at, query.before.id))
    condition = " AND ".join(where) or "1"
    rows = db.execute(
        "SELECT id, chat_key, status, created_at, last_activity_at,"
        f" substr(initial_request, 1, {LISTED_REQUEST_CHARS}), current_round, max_rounds,"
        f" follow_ups FROM consultations WHERE {condition}"
        " ORDER BY created_at DESC, id DESC LIMIT ?",
        (*params, query.bounded_limit()),
    ).fetchall()
    return [listed_from_row(row) for row in rows]


def admin_session_expiry(db: sqlite3.Connection, token_hash: str) -> float | None:
    row = db.execute(
        "SELECT expires_at FROM admin_sessions WHERE token_hash = ?", (token_hash,)
    ).fetchone()
    return None if row is None else float(row[0])


def audit_log(db: sqlite3.Connection, before_id: int | None, limit: int) -> list[AuditEntry]:
    rows = db.execute(
        "SELECT at, actor, action, target, detail, id FROM admin_audit"
        " WHERE id < ? ORDER BY id DESC LIMIT ?",
        (before_id if before_id is not None else 2**63 - 1, max(1, min(limit, MAX_AUDIT_PAGE))),
    ).fetchall()
    return [AuditEntry(*row) for row in rows]


# -- writes --------------------------------------------------------------------------------


def add_audit(db: sqlite3.Connection, entry: AuditEntry) -> None:
    e = entry.bounded()
    db.execute(
        "INSERT INTO admin_audit (at, actor, action, target, detail) VALUES (?, ?, ?, ?, ?)",
        (e.at, e.actor, e.action, e.target, e.detail),
    )


def add_admin_session(
    db: sqlite3.Connection, token_hash: str, expires_at: float, audit: AuditEntry
) -> None:
    """Keep a new session, drop the ones expired by now (through the index on expiry)."""
    db.execute("DELETE FROM admin_sessions WHERE expires_at <= ?", (audit.at,))
    db.execute(
        "INSERT INTO admin_sessions (token_hash, created_at, expires_at) VALUES (?, ?, ?)",
        (token_hash, audit.at, expires_at),
    )
    add_audit(db, audit)


def end_admin_session(db: sqlite3.Connection, token_hash: str, audit: AuditEntry) -> bool:
    gone = db.execute("DELETE FROM admin_sessions WHERE token_hash = ?", (token_hash,)).rowcount
    if gone:
        add_audit(db, audit)
    return gone > 0


def delete_consultation(db: sqlite3.Connection, consultation_id: str, audit: AuditEntry) -> bool:
    """Delete one consultation (its messages and idempotency keys by ON DELETE CASCADE)
    and log it; False, logging nothing, when there is none by that id."""
    gone = db.execute("DELETE FROM consultations WHERE id = ?", (consultation_id,)).rowcount
    if not gone:
        return False
    add_audit(db, audit)
    free_pages(db, VACUUM_PAGES_PER_PURGE)
    return True
