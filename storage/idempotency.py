"""SQL for the API's idempotency keys (table `idempotency_keys`, migration m003).

Invariant: a key is claimed once per client (`INSERT … ON CONFLICT DO NOTHING` keeps
the first claim); its response is written at most once and never changed, so a
retry always gets the reply of the round the key first answered. Rows belong to a
session and go with it (`ON DELETE CASCADE` when the retention purge deletes it).
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from core.errors import SessionNotFound


class KeyRecord(NamedTuple):
    """A claimed key: the request it was first sent with, its session, its reply (or None),
    and when it was claimed."""

    fingerprint: str
    session_id: str
    response: str | None
    created_at: float


def find_key(db: sqlite3.Connection, client: str, key: str) -> KeyRecord | None:
    row = db.execute(
        "SELECT fingerprint, session_id, response, created_at FROM idempotency_keys"
        " WHERE client = ? AND key = ?",
        (client, key),
    ).fetchone()
    return None if row is None else KeyRecord(*row)


def claim_key(
    db: sqlite3.Connection,
    client: str,
    key: str,
    fingerprint: str,
    session_id: str,
    created_at: float,
) -> None:
    """Record the key for `session_id`; a key already claimed is left as it is."""
    try:
        db.execute(
            "INSERT INTO idempotency_keys (client, key, fingerprint, session_id, created_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (client, key) DO NOTHING",
            (client, key, fingerprint, session_id, created_at),
        )
    except sqlite3.IntegrityError as error:  # the session is gone (purged meanwhile)
        raise SessionNotFound(session_id) from error


def save_response(db: sqlite3.Connection, client: str, key: str, response: str) -> None:
    """Store the reply the key answered with, unless one is stored already."""
    db.execute(
        "UPDATE idempotency_keys SET response = ? WHERE client = ? AND key = ?"
        " AND response IS NULL",
        (response, client, key),
    )
