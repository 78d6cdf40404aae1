"""The API's idempotency keys on PostgreSQL (table `idempotency_keys`, migrations m001, m007).

The statements and rules of `storage.shared`, as on SQLite (`storage.sqlite.keys`): a key is
claimed in one statement by one attempt at a time, taken over only when no reply is
stored and no live lease holds it; only its owner renews, releases or attaches a session
to it; its response is written at most once and never changed. Rows go with their
session (`ON DELETE CASCADE`); attaching a session already purged raises
`SessionNotFound`. `PostgresStore` runs each write in a transaction of its own.
"""

from __future__ import annotations

import asyncpg

from core.errors import SessionNotFound
from storage import shared as sql
from storage.shared import Claimed, KeyRecord


async def find_key(connection: asyncpg.Connection, client: str, key: str) -> KeyRecord | None:
    row = await connection.fetchrow(sql.FIND, client, key)
    return None if row is None else KeyRecord(*row)


async def claim_key(
    connection: asyncpg.Connection,
    client: str,
    key: str,
    *,
    fingerprint: str,
    owner: str,
    at: float,
    lease_until: float,
) -> Claimed | None:
    row = await connection.fetchrow(sql.CLAIM, client, key, fingerprint, at, owner, lease_until)
    return None if row is None else Claimed(*row)


async def renew_key(
    connection: asyncpg.Connection, client: str, key: str, owner: str, lease_until: float
) -> bool:
    return _changed(await connection.execute(sql.RENEW, client, key, owner, lease_until))


async def attach_session(
    connection: asyncpg.Connection, client: str, key: str, owner: str, session_id: str
) -> bool:
    try:
        return _changed(await connection.execute(sql.ATTACH, client, key, owner, session_id))
    except asyncpg.ForeignKeyViolationError as error:  # the session was purged
        raise SessionNotFound(session_id) from error


async def release_key(connection: asyncpg.Connection, client: str, key: str, owner: str) -> None:
    await connection.execute(sql.RELEASE_UNOPENED, client, key, owner)
    await connection.execute(sql.RELEASE, client, key, owner)


async def save_response(
    connection: asyncpg.Connection, client: str, key: str, response: str
) -> None:
    await connection.execute(sql.SAVE, client, key, response)


def _changed(status: str) -> bool:
    """Whether an UPDATE's status tag ("UPDATE 1") names a row."""
    return status.rsplit(" ", 1)[-1] == "1"
