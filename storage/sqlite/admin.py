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

from core.domain.audit import MAX_AUDIT_PAGE, AuditEntry
from core.domain.listing import (
    LIKE_ESCAPE,
    LISTED_REQUEST_CHARS,
    ConsultationQuery,
    ListedConsultation,
)
from storage.rows import listed_from_row
from storage.sqlite.erasure import scrub_search_index
from storage.sqlite.placeholders import sqlite_sql
from storage.sqlite.upkeep import VACUUM_PAGES_PER_PURGE, free_pages
from storage.statements.admin import (
    AUDIT_PAGE,
    DROP_EXPIRED_SESSIONS,
    INSERT_AUDIT,
    INSERT_SESSION,
    SESSION_EXPIRY,
)

# -- reads ---------------------------------------------------------------------------------


MIN_INDEXED_SEARCH_CHARS = 3
"""Text this long is found through `consultations_search` (trigrams); shorter text, which
has no trigram, by LIKE on the rows in order until a page is full (every row when rare)."""
SEARCH_WINDOW_ROWS = 1000
"""How many of the newest rows a search checks first: text found in many requests fills a
page from them without reading every match."""
SEARCH_SEEK_ROWS = 64
"""Up to this many rows (a chat's, say) are matched by seeking each in the index rather
than by reading the matches between the lowest and highest of their rowids."""

_LISTED_COLUMNS = (
    "id, chat_key, status, created_at, last_activity_at,"
    f" substr(initial_request, 1, {LISTED_REQUEST_CHARS}), current_round, max_rounds,"
    " follow_ups"
)
_NEWEST_FIRST = " ORDER BY created_at DESC, id DESC"


def list_consultations(
    db: sqlite3.Connection, query: ConsultationQuery
) -> list[ListedConsultation]:
    """A page of `query`, newest first: one range scan of the index on (created_at, id),
    or on (status, …), (chat_key, …) or (person, …) when those are filtered; text of
    `MIN_INDEXED_SEARCH_CHARS` or more through the trigram index instead of every row."""
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
    if query.person is not None:
        where.append("person = ?")
        params.append(query.person)
    if query.before is not None:
        where.append("(created_at, id) < (?, ?)")
        params.extend((query.before.created_at, query.before.id))
    text = query.search_text()
    if text is not None and len(text) >= MIN_INDEXED_SEARCH_CHARS:
        return _search(db, where, params, fts_phrase(text), query.bounded_limit())
    pattern = query.like_pattern()
    if pattern is not None:
        where.append(f"initial_request LIKE ? ESCAPE '{LIKE_ESCAPE}'")
        params.append(pattern)
    rows = db.execute(
        f"SELECT {_LISTED_COLUMNS} FROM consultations WHERE {' AND '.join(where) or '1'}"
        f"{_NEWEST_FIRST} LIMIT ?",
        (*params, query.bounded_limit()),
    ).fetchall()
    return [listed_from_row(row) for row in rows]


def fts_phrase(text: str) -> str:
    """`text` as one FTS5 string: every character literal (quotes doubled), so operators,
    column filters and prefix stars typed into a search are searched for, never obeyed.
    With the trigram tokenizer the string matches requests holding `text`, case folded."""
    return '"' + text.replace('"', '""') + '"'


def _search(
    db: sqlite3.Connection, where: list[str], params: list[Any], phrase: str, limit: int
) -> list[ListedConsultation]:
    """The page of rows meeting `where` whose request matches `phrase`, newest first.

    The newest `SEARCH_WINDOW_ROWS` rows meeting `where` are read from their index first
    and matched (within their range of rowids, or one by one when there are few of them,
    `SEARCH_SEEK_ROWS`): text in many requests fills the page from them. When they hold
    fewer than a page of matches and there are older rows, every match is read from the
    index and sorted (text in few requests: few matches). Either way the page is exactly
    the newest matches; the reads share one snapshot (`storage.sqlite.batch.run_reads`)."""
    condition = " AND ".join(where) or "1"
    window = [
        row[0]
        for row in db.execute(
            f"SELECT rowid FROM consultations WHERE {condition}{_NEWEST_FIRST} LIMIT ?",
            (*params, SEARCH_WINDOW_ROWS),
        )
    ]
    if not window:
        return []
    if len(window) <= SEARCH_SEEK_ROWS:  # few rows, perhaps far apart: one seek each
        within, bounds = f"rowid IN ({', '.join('?' * len(window))})", window
    else:
        within, bounds = "rowid BETWEEN ? AND ?", [min(window), max(window)]
    matched = {
        row[0]
        for row in db.execute(
            f"SELECT rowid FROM consultations_search WHERE consultations_search MATCH ?"
            f" AND {within}",
            (phrase, *bounds),
        )
    }
    found = [rowid for rowid in window if rowid in matched][:limit]
    if len(found) == limit or len(window) < SEARCH_WINDOW_ROWS:
        marks = ", ".join("?" * len(found))
        rows = db.execute(
            f"SELECT {_LISTED_COLUMNS} FROM consultations WHERE rowid IN ({marks}){_NEWEST_FIRST}",
            found,
        ).fetchall()
    else:
        rows = db.execute(
            f"SELECT {_LISTED_COLUMNS} FROM (SELECT rowid AS hit FROM consultations_search"
            " WHERE consultations_search MATCH ?) JOIN consultations ON consultations.rowid = hit"
            f" WHERE {condition}{_NEWEST_FIRST} LIMIT ?",
            (phrase, *params, limit),
        ).fetchall()
    return [listed_from_row(row) for row in rows]


_SESSION_EXPIRY = sqlite_sql(SESSION_EXPIRY)
_AUDIT_PAGE = sqlite_sql(AUDIT_PAGE)
_INSERT_AUDIT = sqlite_sql(INSERT_AUDIT)
_DROP_EXPIRED_SESSIONS = sqlite_sql(DROP_EXPIRED_SESSIONS)
_INSERT_SESSION = sqlite_sql(INSERT_SESSION)


def admin_session_expiry(db: sqlite3.Connection, token_hash: str) -> float | None:
    row = db.execute(_SESSION_EXPIRY, (token_hash,)).fetchone()
    return None if row is None else float(row[0])


def audit_log(db: sqlite3.Connection, before_id: int | None, limit: int) -> list[AuditEntry]:
    rows = db.execute(
        _AUDIT_PAGE,
        (before_id if before_id is not None else 2**63 - 1, max(1, min(limit, MAX_AUDIT_PAGE))),
    ).fetchall()
    return [AuditEntry(*row) for row in rows]


# -- writes --------------------------------------------------------------------------------


def add_audit(db: sqlite3.Connection, entry: AuditEntry) -> None:
    e = entry.bounded()
    db.execute(
        _INSERT_AUDIT,
        (e.at, e.actor, e.action, e.target, e.detail),
    )


def add_admin_session(
    db: sqlite3.Connection, token_hash: str, expires_at: float, audit: AuditEntry
) -> None:
    """Keep a new session, drop the ones expired by now (through the index on expiry)."""
    db.execute(_DROP_EXPIRED_SESSIONS, (audit.at,))
    db.execute(_INSERT_SESSION, (token_hash, audit.at, expires_at))
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
    scrub_search_index(db)
    free_pages(db, VACUUM_PAGES_PER_PURGE)
    return True
