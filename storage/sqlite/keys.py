"""The API's idempotency keys on SQLite: the shared statements (`storage.shared`) with
SQLite's parameters, each run on a connection's thread inside the store's transaction.

The rules are `storage.shared`'s: a key is claimed in one statement by one attempt at a
time, taken over only when no reply is stored and no live lease holds it; only its owner
renews, releases or attaches a session to it; its response is written at most once and
never changed; attaching a session already purged raises `SessionNotFound`.
"""

from __future__ import annotations

import sqlite3

from core.errors import SessionNotFound
from storage.shared import (
    ATTACH,
    CLAIM,
    FIND,
    RELEASE,
    RELEASE_UNOPENED,
    RENEW,
    SAVE,
    Claimed,
    KeyRecord,
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
