"""Client memory on PostgreSQL: facts per owner and preferences per person (memory on or
off, the interface language).

Invariants (with `core.domain.facts`): an owner holds at most `MAX_FACTS` facts, the newest by
id (an identity, never reused), none equal to another ignoring case and spacing. Adding
facts is one transaction under a transaction-scoped advisory lock on the owner, so two
workers adding facts for one owner at once take turns and never both add the same fact.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import asyncpg

from core.domain.facts import MAX_FACTS, Fact, MemoryPreferences, MemoryState, distinct_facts
from storage.statements.memory import (
    DELETE_LANGUAGE,
    DELETE_PREFERENCES,
    FACTS_OF,
    FORGET_IN_CONSULTATIONS,
    SELECT_LANGUAGE,
    SELECT_PREFERENCES,
    TRIM_FACTS,
    UPSERT_LANGUAGE,
    UPSERT_PREFERENCES,
)
from storage.statements.tool_usage import DELETE_PERSON_TOOL_CALLS


async def load_memory(connection: asyncpg.Connection, owner: str, person: str) -> MemoryState:
    rows = await connection.fetch(FACTS_OF, owner, MAX_FACTS)
    row = await connection.fetchrow(SELECT_PREFERENCES, person)
    preferences = (
        MemoryPreferences()
        if row is None
        else MemoryPreferences(bool(row["enabled"]), bool(row["notice_given"]))
    )
    facts = tuple(Fact(r["id"], r["text"], r["created_at"]) for r in rows)
    return MemoryState(facts, preferences)


async def add_facts(
    connection: asyncpg.Connection, owner: str, person: str, facts: Sequence[str], at: float
) -> tuple[Fact, ...]:
    """Insert the facts `owner` lacks, drop the oldest past `MAX_FACTS`; the ones added,
    newest first (in the caller's transaction)."""
    await connection.execute("SELECT pg_advisory_xact_lock(hashtext('memory:' || $1))", owner)
    known = [row["text"] for row in await connection.fetch(FACTS_OF, owner, MAX_FACTS)]
    new = [text.replace("\x00", "") for text in distinct_facts(facts, known=known)]
    rows = await connection.fetch(
        "INSERT INTO memory_facts (owner, person, text, created_at)"
        " SELECT $1, $2, u.text, $4 FROM unnest($3::text[]) WITH ORDINALITY AS u (text, n)"
        " ORDER BY u.n RETURNING id, text, created_at",
        owner,
        person,
        new,
        at,
    )
    await connection.execute(TRIM_FACTS, owner, MAX_FACTS)
    added = sorted((Fact(r["id"], r["text"], r["created_at"]) for r in rows), key=lambda f: f.id)
    return tuple(reversed(added))


async def delete_fact(connection: asyncpg.Connection, owner: str, fact_id: int) -> bool:
    found = await connection.fetchval(
        "DELETE FROM memory_facts WHERE owner = $1 AND id = $2 RETURNING 1", owner, fact_id
    )
    return found is not None


async def save_preferences(
    connection: asyncpg.Connection, person: str, p: MemoryPreferences
) -> None:
    await connection.execute(
        UPSERT_PREFERENCES,
        person,
        p.enabled,
        p.notice_given,
        time.time(),
    )


async def forget_memory(connection: asyncpg.Connection, person: str) -> int:
    """Delete the person's facts, preferences, language and tool calls by day, and the
    facts their consultations still kept (`FORGET_IN_CONSULTATIONS`); how many facts went."""
    deleted = await connection.fetchval(
        "WITH gone AS (DELETE FROM memory_facts WHERE person = $1 RETURNING 1)"
        " SELECT count(*) FROM gone",
        person,
    )
    await connection.execute(FORGET_IN_CONSULTATIONS, person)
    await connection.execute(DELETE_PREFERENCES, person)
    await connection.execute(DELETE_LANGUAGE, person)
    await connection.execute(DELETE_PERSON_TOOL_CALLS, person)
    return int(deleted)


async def load_language(connection: asyncpg.Connection, person: str) -> str | None:
    language = await connection.fetchval(SELECT_LANGUAGE, person)
    return None if language is None else str(language)


async def delete_language(connection: asyncpg.Connection, person: str) -> bool:
    gone = await connection.fetchval(
        "DELETE FROM person_languages WHERE person = $1 RETURNING 1", person
    )
    return gone is not None


async def save_language(connection: asyncpg.Connection, person: str, language: str) -> None:
    await connection.execute(
        UPSERT_LANGUAGE,
        person,
        language,
        time.time(),
    )
