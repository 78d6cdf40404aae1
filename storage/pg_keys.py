"""The API's idempotency keys on PostgreSQL (table `idempotency_keys`, migration m003).

The same rules as the SQLite statements in `storage.idempotency`: a key is claimed once
per client (`ON CONFLICT DO NOTHING` keeps the first claim); its response is written at
most once and never changed, so a retry always gets the reply of the round the key first
answered. Rows belong to a session and go with it (`ON DELETE CASCADE` when the
retention purge deletes it); claiming a key for a session already purged raises
`SessionNotFound`. Every statement is parameterised; `PostgresStore` runs each write in
a transaction of its own.
"""

from __future__ import annotations

import asyncpg

from core.errors import SessionNotFound
from storage.idempotency import KeyRecord


async def find_key(connection: asyncpg.Connection, client: str, key: str) -> KeyRecord | None:
    row = await connection.fetchrow(
        "SELECT fingerprint, session_id, response, created_at FROM idempotency_keys"
        " WHERE client = $1 AND key = $2",
        client,
        key,
    )
    return None if row is None else KeyRecord(*row)


async def claim_key(
    connection: asyncpg.Connection,
    client: str,
    key: str,
    *,
    fingerprint: str,
    session_id: str,
    at: float,
) -> None:
    """Record the key for the session (a key already claimed keeps its first claim)."""
    try:
        await connection.execute(
            "INSERT INTO idempotency_keys (client, key, fingerprint, session_id,"
            " created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (client, key) DO NOTHING",
            client,
            key,
            fingerprint,
            session_id,
            at,
        )
    except asyncpg.ForeignKeyViolationError as error:  # the session was purged
        raise SessionNotFound(session_id) from error


async def save_response(
    connection: asyncpg.Connection, client: str, key: str, response: str
) -> None:
    """Store the reply a key answered with, unless one is stored already."""
    await connection.execute(
        "UPDATE idempotency_keys SET response = $1 WHERE client = $2 AND key = $3"
        " AND response IS NULL",
        response,
        client,
        key,
    )
