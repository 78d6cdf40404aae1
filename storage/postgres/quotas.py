"""Quotas on PostgreSQL (`core.domain.quotas`): consultations started per person and UTC day, the
turns' token holds (`core.turns.quota_holds`), and the admins' overrides.

Invariants:
- A start is counted by an UPSERT that adds in the database, in the transaction that
  creates its consultation, so workers starting consultations at once each count theirs;
  with a limit it adds only below it (the conflicting row is locked and its latest
  version compared), so the check and the count are one write across workers.
- A hold is read and stored under transaction-level advisory locks on its person and its
  client key (taken in key order, so two holds never wait in a circle): across workers,
  one hold at a time per person and per client key reads the standing and adds to it.
"""

from __future__ import annotations

from collections.abc import Callable

import asyncpg

from core.domain.quotas import QuotaOverride, Standing, StartRefused, TokenHold
from storage.statements.quotas import (
    RELEASE_HOLD,
    RESIZE_HOLD,
    SELECT_OVERRIDE,
    STARTED,
    UPSERT_OVERRIDE,
)

_COUNT_START = (
    "INSERT INTO consultation_starts (person, day, started) VALUES ($1, $2, 1)"
    " ON CONFLICT (person, day) DO UPDATE SET started = consultation_starts.started + 1"
)
_COUNT_START_WITHIN = (
    f"{_COUNT_START} WHERE consultation_starts.started < $3::integer RETURNING started"
)
_LOCK = (
    # One statement, the keys locked in order: its own, so the standing read after it sees
    # every hold committed before the locks were granted.
    "SELECT pg_advisory_xact_lock(hashtextextended('quota-hold:' || k, 0))"
    " FROM (SELECT unnest($1::text[]) AS k ORDER BY 1) AS keys"
)
_INSERT_HOLD = (
    "WITH expired AS (DELETE FROM quota_holds WHERE expires_at <= $7)"
    " INSERT INTO quota_holds (id, person, client, day, tokens, expires_at)"
    " VALUES ($1, $2, $3, $4, $5, $6)"
)
_STANDING = (
    # $1 person, $2 client, $3 day, $4 month's first day, $5 now.
    "SELECT"
    " (SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM usage_daily"
    "  WHERE scope_kind = 'person' AND scope_key = $1 AND day = $3)"
    " + (SELECT COALESCE(SUM(tokens), 0) FROM quota_holds"
    "  WHERE person = $1 AND day = $3 AND expires_at > $5) AS today,"
    " (SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM usage_daily"
    "  WHERE scope_kind = 'person' AND scope_key = $1 AND day BETWEEN $4 AND $3)"
    " + (SELECT COALESCE(SUM(tokens), 0) FROM quota_holds"
    "  WHERE person = $1 AND day BETWEEN $4 AND $3 AND expires_at > $5) AS month,"
    " (SELECT COALESCE(MAX(started), 0) FROM consultation_starts"
    "  WHERE person = $1 AND day = $3) AS started,"
    " (SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM usage_daily"
    "  WHERE scope_kind = 'client' AND scope_key = $2 AND day = $3)"
    " + (SELECT COALESCE(SUM(tokens), 0) FROM quota_holds"
    "  WHERE client = $2 AND day = $3 AND expires_at > $5) AS client"
)


async def count_start(
    connection: asyncpg.Connection, person: str, day: str, limit: int = 0
) -> None:
    """Add one to the person's consultations started that day (in the caller's
    transaction); with a `limit` (0: none) only below it, else `StartRefused`."""
    if not limit:
        await connection.execute(_COUNT_START, person, day)
        return
    if await connection.fetchval(_COUNT_START_WITHIN, person, day, limit) is None:
        raise StartRefused(await consultations_started(connection, person, day))


async def hold_tokens(
    connection: asyncpg.Connection,
    hold: TokenHold,
    month: str,
    now: float,
    admit: Callable[[Standing], bool],
) -> tuple[Standing, bool]:
    """The standing with the live holds, and the hold stored if `admit` says so (in the
    caller's transaction, under the person's and the client key's locks)."""
    named = (("person", hold.person), ("client", hold.client))
    await connection.execute(_LOCK, [f"{kind}:{key}" for kind, key in named if key])
    row = await connection.fetchrow(
        _STANDING, hold.person or "", hold.client or "", hold.day, month, now
    )
    standing = Standing(
        tokens_today=int(row["today"]) if hold.person else 0,
        tokens_month=int(row["month"]) if hold.person else 0,
        consultations_today=int(row["started"]) if hold.person else 0,
        client_tokens_today=int(row["client"]) if hold.client else 0,
    )
    if not admit(standing):
        return standing, False
    await connection.execute(
        _INSERT_HOLD,
        hold.id,
        hold.person,
        hold.client,
        hold.day,
        hold.tokens,
        hold.expires_at,
        now,
    )
    return standing, True


async def resize_hold(
    connection: asyncpg.Connection, hold_id: str, tokens: int, expires_at: float
) -> None:
    await connection.execute(RESIZE_HOLD, hold_id, tokens, expires_at)


async def release_hold(connection: asyncpg.Connection, hold_id: str) -> None:
    await connection.execute(RELEASE_HOLD, hold_id)


async def consultations_started(connection: asyncpg.Connection, person: str, day: str) -> int:
    value = await connection.fetchval(STARTED, person, day)
    return 0 if value is None else int(value)


async def load_override(connection: asyncpg.Connection, person: str) -> QuotaOverride | None:
    row = await connection.fetchrow(SELECT_OVERRIDE, person)
    return None if row is None else QuotaOverride(person, row[0])


async def save_override(connection: asyncpg.Connection, override: QuotaOverride, at: float) -> None:
    await connection.execute(
        UPSERT_OVERRIDE,
        override.person,
        override.daily_tokens,
        at,
    )


async def delete_override(connection: asyncpg.Connection, person: str) -> bool:
    deleted = await connection.fetchval(
        "DELETE FROM quota_overrides WHERE person = $1 RETURNING 1", person
    )
    return deleted is not None
