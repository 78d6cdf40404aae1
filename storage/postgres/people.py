"""The console's people (`core.people`) and the operator's actions on one person on
PostgreSQL: each action and its audit entry in one transaction.

Invariant: a page of the list is one statement: an aggregate over the usage table's
person scope (its primary key's range), with the day's starts and the overrides joined
by their keys for the page's people only.
"""

from __future__ import annotations

import asyncpg

from core.audit import AuditEntry
from core.memory import Fact
from core.people import PeopleQuery, PersonRow
from core.quotas import QuotaOverride
from storage.postgres import memory, quotas
from storage.postgres.admin import add_audit

_PEOPLE = (
    "SELECT p.person, p.last_day, p.today, p.month, s.started,"
    " o.person IS NOT NULL AS overridden, o.daily_tokens FROM ("
    " SELECT scope_key AS person, MAX(day) AS last_day,"
    " SUM(CASE WHEN day = $1 THEN prompt_tokens + completion_tokens ELSE 0 END) AS today,"
    " SUM(CASE WHEN day >= $2 THEN prompt_tokens + completion_tokens ELSE 0 END) AS month"
    " FROM usage_daily WHERE scope_kind = 'person' AND strpos(scope_key, $3) > 0"
    " GROUP BY scope_key"
    " HAVING $4::text IS NULL OR MAX(day) < $4 OR (MAX(day) = $4 AND scope_key > $5)"
    " ORDER BY last_day DESC, scope_key LIMIT $6) AS p"
    " LEFT JOIN consultation_starts s ON s.person = p.person AND s.day = $1"
    " LEFT JOIN quota_overrides o ON o.person = p.person"
    " ORDER BY p.last_day DESC, p.person"
)
_FACTS = "SELECT id, text, created_at FROM memory_facts WHERE person = $1 ORDER BY id DESC LIMIT $2"


async def list_people(connection: asyncpg.Connection, query: PeopleQuery) -> list[PersonRow]:
    after_day, after_key = query.after if query.after is not None else (None, None)
    rows = await connection.fetch(
        _PEOPLE, query.today, query.month_start, query.search, after_day, after_key, query.limit
    )
    return [
        PersonRow(
            str(r["person"]),
            str(r["last_day"]),
            int(r["today"] or 0),
            int(r["month"] or 0),
            int(r["started"] or 0),
            QuotaOverride(str(r["person"]), r["daily_tokens"]) if r["overridden"] else None,
        )
        for r in rows
    ]


async def person_facts(connection: asyncpg.Connection, person: str, limit: int) -> list[Fact]:
    return [Fact(*row) for row in await connection.fetch(_FACTS, person, limit)]


async def set_override(
    connection: asyncpg.Connection,
    person: str,
    override: QuotaOverride | None,
    at: float,
    audit: AuditEntry,
) -> bool:
    """Set the override, or remove it (None); logged when something changed."""
    if override is None:
        changed = await quotas.delete_override(connection, person)
    else:
        await quotas.save_override(connection, override, at)
        changed = True
    if changed:
        await add_audit(connection, audit)
    return changed


async def forget_memory(connection: asyncpg.Connection, person: str, audit: AuditEntry) -> int:
    """Delete the person's facts and preferences as /forget does; always logged."""
    deleted = await memory.forget_memory(connection, person)
    await add_audit(connection, audit)
    return deleted


async def is_blocked(connection: asyncpg.Connection, person: str) -> bool:
    found = await connection.fetchval("SELECT 1 FROM blocked_people WHERE person = $1", person)
    return found is not None


async def set_blocked(
    connection: asyncpg.Connection, person: str, blocked: bool, at: float, audit: AuditEntry
) -> bool:
    """Block or unblock; logged when something changed."""
    if blocked:
        changed = await connection.fetchval(
            "INSERT INTO blocked_people (person, blocked_at) VALUES ($1, $2)"
            " ON CONFLICT (person) DO NOTHING RETURNING 1",
            person,
            at,
        )
    else:
        changed = await connection.fetchval(
            "DELETE FROM blocked_people WHERE person = $1 RETURNING 1", person
        )
    if changed is not None:
        await add_audit(connection, audit)
    return changed is not None
