"""The operator's console on PostgreSQL: the consultation list, console sessions and the
audit log.

Each write runs in the caller's transaction (`StoreCalls._write`): an action and its audit
entry are committed together, or neither. Every value is a parameter; the only text
formatted into SQL is the fixed fragments written here.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from core.domain.audit import MAX_AUDIT_PAGE, AuditEntry
from core.domain.listing import (
    LIKE_ESCAPE,
    LISTED_REQUEST_CHARS,
    ConsultationQuery,
    ListedConsultation,
)
from storage.rows import listed_from_row
from storage.statements.admin import (
    AUDIT_PAGE,
    DROP_EXPIRED_SESSIONS,
    INSERT_AUDIT,
    INSERT_SESSION,
    SESSION_EXPIRY,
)

# -- reads ---------------------------------------------------------------------------------


async def list_consultations(
    connection: asyncpg.Connection, query: ConsultationQuery
) -> list[ListedConsultation]:
    """A page of `query`, newest first: one range scan of the index on (created_at, id),
    or on (status, …), (chat_key, …) or (person, …) when those are filtered."""
    where: list[str] = []
    params: list[Any] = []

    def param(value: Any) -> str:
        params.append(value)
        return f"${len(params)}"

    if query.since is not None:
        where.append(f"created_at >= {param(query.since)}")
    if query.until is not None:
        where.append(f"created_at < {param(query.until)}")
    if query.status is not None:
        where.append(f"status = {param(query.status.value)}")
    if query.chat_key is not None:
        where.append(f"chat_key = {param(query.chat_key)}")
    if query.person is not None:
        where.append(f"person = {param(query.person)}")
    pattern = query.like_pattern()
    if pattern is not None:
        where.append(f"initial_request ILIKE {param(pattern)} ESCAPE '{LIKE_ESCAPE}'")
    if query.before is not None:
        created, ident = param(query.before.created_at), param(query.before.id)
        where.append(f"(created_at, id) < ({created}, {ident})")
    condition = " AND ".join(where) or "TRUE"
    limit = param(query.bounded_limit())
    statement = (
        "SELECT id, chat_key, status, created_at, last_activity_at,"
        f" substr(initial_request, 1, {LISTED_REQUEST_CHARS}), current_round, max_rounds,"
        f" follow_ups FROM consultations WHERE {condition}"
        f" ORDER BY created_at DESC, id DESC LIMIT {limit}"
    )
    if pattern is None:
        rows = await connection.fetch(statement, *params)
    else:
        # Planned for this pattern each time: a prepared statement's generic plan, blind to
        # how many requests hold the text, would page through every row by date rather
        # than ask the trigram index.
        async with connection.transaction():
            await connection.execute("SET LOCAL plan_cache_mode = force_custom_plan")
            rows = await connection.fetch(statement, *params)
    return [listed_from_row(r) for r in rows]


async def admin_session_expiry(connection: asyncpg.Connection, token_hash: str) -> float | None:
    value = await connection.fetchval(SESSION_EXPIRY, token_hash)
    return None if value is None else float(value)


async def audit_log(
    connection: asyncpg.Connection, before_id: int | None, limit: int
) -> list[AuditEntry]:
    rows = await connection.fetch(
        AUDIT_PAGE,
        before_id if before_id is not None else 2**63 - 1,
        max(1, min(limit, MAX_AUDIT_PAGE)),
    )
    return [AuditEntry(*row) for row in rows]


# -- writes --------------------------------------------------------------------------------


async def add_audit(connection: asyncpg.Connection, entry: AuditEntry) -> None:
    e = entry.bounded()
    await connection.execute(
        INSERT_AUDIT,
        e.at,
        e.actor,
        e.action,
        e.target,
        e.detail,
    )


async def add_admin_session(
    connection: asyncpg.Connection, token_hash: str, expires_at: float, audit: AuditEntry
) -> None:
    """Keep a new session, drop the ones expired by now (through the index on expiry)."""
    await connection.execute(DROP_EXPIRED_SESSIONS, audit.at)
    await connection.execute(INSERT_SESSION, token_hash, audit.at, expires_at)
    await add_audit(connection, audit)


async def end_admin_session(
    connection: asyncpg.Connection, token_hash: str, audit: AuditEntry
) -> bool:
    gone = await connection.fetchval(
        "DELETE FROM admin_sessions WHERE token_hash = $1 RETURNING 1", token_hash
    )
    if gone is None:
        return False
    await add_audit(connection, audit)
    return True


async def delete_consultation(
    connection: asyncpg.Connection, consultation_id: str, audit: AuditEntry
) -> bool:
    """Delete one consultation (its messages and idempotency keys by ON DELETE CASCADE)
    and log it; False, logging nothing, when there is none by that id."""
    gone = await connection.fetchval(
        "DELETE FROM consultations WHERE id = $1 RETURNING 1", consultation_id
    )
    if gone is None:
        return False
    await add_audit(connection, audit)
    return True
