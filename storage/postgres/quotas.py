"""Quotas on PostgreSQL (`core.quotas`): consultations started per person and UTC day, and
the admins' overrides.

Invariant: a start is counted by an UPSERT that adds in the database, in the transaction
that creates its consultation, so workers starting consultations at once each count theirs.
"""

from __future__ import annotations

import asyncpg

from core.quotas import QuotaOverride

COUNT_START = (
    "INSERT INTO consultation_starts (person, day, started) VALUES ($1, $2, 1)"
    " ON CONFLICT (person, day) DO UPDATE SET started = consultation_starts.started + 1"
)


async def consultations_started(connection: asyncpg.Connection, person: str, day: str) -> int:
    value = await connection.fetchval(
        "SELECT started FROM consultation_starts WHERE person = $1 AND day = $2", person, day
    )
    return 0 if value is None else int(value)


async def load_override(connection: asyncpg.Connection, person: str) -> QuotaOverride | None:
    row = await connection.fetchrow(
        "SELECT daily_tokens FROM quota_overrides WHERE person = $1", person
    )
    return None if row is None else QuotaOverride(person, row[0])


async def save_override(connection: asyncpg.Connection, override: QuotaOverride, at: float) -> None:
    await connection.execute(
        "INSERT INTO quota_overrides (person, daily_tokens, updated_at) VALUES ($1, $2, $3)"
        " ON CONFLICT (person) DO UPDATE SET daily_tokens = excluded.daily_tokens,"
        " updated_at = excluded.updated_at",
        override.person,
        override.daily_tokens,
        at,
    )


async def delete_override(connection: asyncpg.Connection, person: str) -> bool:
    deleted = await connection.fetchval(
        "DELETE FROM quota_overrides WHERE person = $1 RETURNING 1", person
    )
    return deleted is not None
