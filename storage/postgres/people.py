"""The console's people (`core.domain.people`) and the operator's actions on one person on
PostgreSQL: each action and its audit entry in one transaction.

Invariant: a page of the list is one statement reading `person_activity` through its
index (last day charged, newest first, then key) from where the previous page ended, so
its cost is the page's, not the history's; each person's tokens are added up from their
usage rows of this month only (a range of the usage table's primary key), and the day's
starts and the override are joined by key, all for the page's people only.
"""

from __future__ import annotations

import asyncpg

from core.domain.audit import AuditEntry
from core.domain.facts import Fact
from core.domain.people import PeopleQuery, PersonRow
from core.domain.quotas import QuotaOverride
from storage.postgres import memory, quotas
from storage.postgres.admin import add_audit
from storage.statements.people import IS_BLOCKED


def _people(after: bool) -> str:
    """The page's statement; after a page, from the (last day, key) it ended at: the
    days up to that one seek the index, the rest of the key is a filter."""
    where = " AND a.last_day <= $4 AND (a.last_day < $4 OR a.person > $5)" if after else ""
    return (
        "SELECT p.person, p.last_day, t.today, t.month, s.started,"
        " o.person IS NOT NULL AS overridden, o.daily_tokens FROM ("
        " SELECT a.person, a.last_day FROM person_activity a"
        f" WHERE strpos(a.person, $3) > 0{where}"
        f" ORDER BY a.last_day DESC, a.person LIMIT ${6 if after else 4}) AS p"
        " CROSS JOIN LATERAL (SELECT"
        " SUM(u.prompt_tokens + u.completion_tokens) FILTER (WHERE u.day = $1) AS today,"
        " SUM(u.prompt_tokens + u.completion_tokens) AS month FROM usage_daily u"
        " WHERE u.scope_kind = 'person' AND u.scope_key = p.person AND u.day >= $2) AS t"
        " LEFT JOIN consultation_starts s ON s.person = p.person AND s.day = $1"
        " LEFT JOIN quota_overrides o ON o.person = p.person"
        " ORDER BY p.last_day DESC, p.person"
    )


_FIRST_PAGE = _people(after=False)
_NEXT_PAGE = _people(after=True)
_FACTS = "SELECT id, text, created_at FROM memory_facts WHERE person = $1 ORDER BY id DESC LIMIT $2"


async def list_people(connection: asyncpg.Connection, query: PeopleQuery) -> list[PersonRow]:
    if query.after is None:
        rows = await connection.fetch(
            _FIRST_PAGE, query.today, query.month_start, query.search, query.limit
        )
    else:
        after_day, after_key = query.after
        rows = await connection.fetch(
            _NEXT_PAGE,
            query.today,
            query.month_start,
            query.search,
            after_day,
            after_key,
            query.limit,
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
    found = await connection.fetchval(IS_BLOCKED, person)
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
