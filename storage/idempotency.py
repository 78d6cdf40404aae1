"""SQL for the API's idempotency keys (table `idempotency_keys`, migrations m003 and m007).

Invariants:
- a key is claimed by one attempt at a time, in one statement (`INSERT … ON CONFLICT DO
  UPDATE … WHERE … RETURNING`): the first claim inserts the row, and a later attempt
  with the same request takes it over only when no reply is stored and no live lease
  holds it (its owner failed and released it, or died and let the lease run out);
- the row's `owner` and `lease_until` name the attempt answering it; only that owner
  renews, releases or attaches a session to it;
- its response is written at most once and never changed, so a retry always gets the
  reply of the round the key first answered;
- rows belong to a session and go with it (`ON DELETE CASCADE` when the retention purge
  deletes it); a claim released before any session was opened is deleted at once, and
  one whose holder died before opening a session goes with the retention purge.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from core.errors import SessionNotFound


class KeyRecord(NamedTuple):
    """A claimed key: the request it was first sent with, its session (None before one was
    opened), its reply (or None), when it was first claimed, and until when its current
    owner's lease runs (None: nobody is answering it)."""

    fingerprint: str
    session_id: str | None
    response: str | None
    created_at: float
    lease_until: float | None


class Claimed(NamedTuple):
    """A key this attempt now holds: the session an earlier attempt opened (or None) and
    when the key was first claimed."""

    session_id: str | None
    created_at: float


CLAIM = (
    "INSERT INTO idempotency_keys (client, key, fingerprint, created_at, owner, lease_until)"
    " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (client, key) DO UPDATE"
    " SET owner = excluded.owner, lease_until = excluded.lease_until"
    " WHERE idempotency_keys.fingerprint = excluded.fingerprint"
    " AND idempotency_keys.response IS NULL"
    " AND (idempotency_keys.lease_until IS NULL OR idempotency_keys.lease_until < $4)"
    " RETURNING session_id, created_at"
)
"""Claim a key, or take over an abandoned claim of the same request (both stores)."""

FIND = (
    "SELECT fingerprint, session_id, response, created_at, lease_until FROM idempotency_keys"
    " WHERE client = $1 AND key = $2"
)
RENEW = (
    "UPDATE idempotency_keys SET lease_until = $4"
    " WHERE client = $1 AND key = $2 AND owner = $3 AND response IS NULL"
)
ATTACH = (
    "UPDATE idempotency_keys SET session_id = $4"
    " WHERE client = $1 AND key = $2 AND owner = $3 AND response IS NULL"
)
RELEASE_UNOPENED = (
    "DELETE FROM idempotency_keys"
    " WHERE client = $1 AND key = $2 AND owner = $3 AND session_id IS NULL"
)
RELEASE = (
    "UPDATE idempotency_keys SET owner = NULL, lease_until = NULL"
    " WHERE client = $1 AND key = $2 AND owner = $3"
)
PURGE_UNOPENED = (
    "DELETE FROM idempotency_keys WHERE session_id IS NULL AND created_at < $1"
    " AND (lease_until IS NULL OR lease_until < $1)"
)
"""Claims whose holder died before opening a session (the retention purge drops them)."""
SAVE = (
    "UPDATE idempotency_keys SET response = $3, owner = NULL, lease_until = NULL"
    " WHERE client = $1 AND key = $2 AND response IS NULL"
)


def sqlite_sql(statement: str) -> str:
    """A statement above with SQLite's numbered parameters (`?1`) for PostgreSQL's (`$1`)."""
    return statement.replace("$", "?")


def find_key(db: sqlite3.Connection, client: str, key: str) -> KeyRecord | None:
    row = db.execute(sqlite_sql(FIND), (client, key)).fetchone()
    return None if row is None else KeyRecord(*row)


def claim_key(
    db: sqlite3.Connection,
    client: str,
    key: str,
    fingerprint: str,
    owner: str,
    at: float,
    lease_until: float,
) -> Claimed | None:
    """Hold the key for `owner`; None when another attempt holds it, answered it, or it
    was first sent with another request (`find_key` tells which)."""
    row = db.execute(
        sqlite_sql(CLAIM), (client, key, fingerprint, at, owner, lease_until)
    ).fetchone()
    return None if row is None else Claimed(*row)


def renew_key(
    db: sqlite3.Connection, client: str, key: str, owner: str, lease_until: float
) -> bool:
    """Extend `owner`'s lease; False when the key is no longer its own."""
    return db.execute(sqlite_sql(RENEW), (client, key, owner, lease_until)).rowcount == 1


def attach_session(
    db: sqlite3.Connection, client: str, key: str, owner: str, session_id: str
) -> bool:
    """Record the session `owner` answers the key in; False when the key is not its own."""
    try:
        cursor = db.execute(sqlite_sql(ATTACH), (client, key, owner, session_id))
    except sqlite3.IntegrityError as error:  # the session is gone (purged meanwhile)
        raise SessionNotFound(session_id) from error
    return cursor.rowcount == 1


def release_key(db: sqlite3.Connection, client: str, key: str, owner: str) -> None:
    """`owner` gives the key up unanswered: the next attempt with it really retries."""
    db.execute(sqlite_sql(RELEASE_UNOPENED), (client, key, owner))
    db.execute(sqlite_sql(RELEASE), (client, key, owner))


def save_response(db: sqlite3.Connection, client: str, key: str, response: str) -> None:
    """Store the reply the key answered with, unless one is stored already."""
    db.execute(sqlite_sql(SAVE), (client, key, response))
