"""The operator's figures (`core.domain.stats`) from one snapshot of the PostgreSQL database.

Invariants: a handful of aggregate queries per period, each bounded by an index on the
period (`consultations_created`, `consultations_ended`, `usage_daily_kind_day`,
`tool_usage_daily_kind_day`), never a
row per consultation to the client; run in one read-only REPEATABLE READ transaction, so
all figures of a period come from one snapshot. The percentiles are `percentile_cont`:
linear interpolation between the closest ranks, as `core.domain.stats` defines them.
"""

from __future__ import annotations

import asyncpg

from core.domain.stats import (
    MAX_MODELS,
    MEDIAN,
    P95,
    ROUNDS_TAIL,
    Period,
    Stats,
    rounds_distribution,
)
from core.domain.tool_usage import ToolCount, listed
from core.domain.usage import UsageTotal
from storage.statements.tool_usage import CHATS_TOOL_CALLS
from storage.statements.usage import CHATS_BY_MODEL

_STARTED = "SELECT COUNT(*) FROM consultations WHERE created_at >= $1 AND created_at < $2"
_ENDED = (
    "SELECT status, COUNT(*) AS n, SUM(current_round) AS rounds,"
    " SUM(CASE WHEN current_round < max_rounds THEN 1 ELSE 0 END) AS early,"
    " percentile_cont($3::double precision) WITHIN GROUP (ORDER BY ended_at - created_at)"
    " AS median,"
    " percentile_cont($4::double precision) WITHIN GROUP (ORDER BY ended_at - created_at)"
    " AS p95"
    " FROM consultations WHERE ended_at >= $1 AND ended_at < $2 GROUP BY status"
)
# Rounds past the tail are counted in its bucket here, so at most ROUNDS_TAIL + 1 rows.
_ROUNDS = (
    "SELECT LEAST(GREATEST(current_round, 0), $3) AS rounds, COUNT(*) AS n FROM consultations"
    " WHERE ended_at >= $1 AND ended_at < $2 AND status = 'complete' GROUP BY 1"
)
_PEOPLE = (
    "SELECT COUNT(*) FROM (SELECT scope_key FROM usage_daily"
    " WHERE scope_kind = 'person' AND day BETWEEN $1 AND $2"
    " UNION SELECT 'tg:' || started_by FROM consultations"
    " WHERE created_at >= $3 AND created_at < $4 AND started_by IS NOT NULL) AS people"
)
# Each charge is in its chat's rows exactly once, so the chat scope counts every call once.
_TOTALS = (
    "SELECT SUM(CASE WHEN kind = 'follow_up' THEN calls ELSE 0 END) AS follow_ups,"
    " SUM(prompt_tokens) AS prompt, SUM(completion_tokens) AS completion, SUM(cost) AS cost"
    " FROM usage_daily WHERE scope_kind = 'chat' AND day BETWEEN $1 AND $2"
)


async def stats_of(connection: asyncpg.Connection, period: Period) -> Stats:
    """The period's figures, from one snapshot."""
    times = (period.since, period.until)
    days = (period.since_day, period.until_day)
    async with connection.transaction(isolation="repeatable_read", readonly=True):
        started = await connection.fetchval(_STARTED, *times)
        ended = {row["status"]: row for row in await connection.fetch(_ENDED, *times, MEDIAN, P95)}
        rounds = await connection.fetch(_ROUNDS, *times, ROUNDS_TAIL)
        people = await connection.fetchval(_PEOPLE, *days, *times)
        totals = await connection.fetchrow(_TOTALS, *days)
        rows = await connection.fetch(CHATS_BY_MODEL, *days, MAX_MODELS)
        tools = await connection.fetch(CHATS_TOOL_CALLS, *days)
    complete = ended.get("complete")

    def count(status: str) -> int:
        row = ended.get(status)
        return 0 if row is None else int(row["n"])

    return Stats(
        since_day=period.since_day,
        until_day=period.until_day,
        people=int(people),
        started=int(started),
        completed=count("complete"),
        reset=count("reset"),
        expired=count("expired"),
        rounds_used=0 if complete is None else int(complete["rounds"]),
        early_finishes=0 if complete is None else int(complete["early"]),
        follow_ups=int(totals["follow_ups"] or 0),
        prompt_tokens=int(totals["prompt"] or 0),
        completion_tokens=int(totals["completion"] or 0),
        cost=float(totals["cost"] or 0.0),
        usage=tuple(
            UsageTotal(str(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), float(r[5]))
            for r in rows
        ),
        answer_seconds_median=None if complete is None else float(complete["median"]),
        answer_seconds_p95=None if complete is None else float(complete["p95"]),
        rounds=rounds_distribution((int(r["rounds"]), int(r["n"])) for r in rounds),
        tools=listed(map(_tool_count, tools)),
    )


def _tool_count(row: asyncpg.Record) -> ToolCount:
    return ToolCount(str(row[0]), int(row[1]), int(row[2]))
