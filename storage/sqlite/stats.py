"""The operator's figures (`core.domain.stats`) from one read snapshot of the SQLite file.

Invariants: a handful of aggregate queries per period, each bounded by an index on the
period (`consultations_created`, `consultations_ended`, `usage_daily_kind_day`,
`tool_usage_daily_kind_day`; named with
INDEXED BY, so the planner never scans the table instead), never a row per consultation
into Python. SQLite has no `percentile_cont`: the number of answer
times is counted first, then each percentile reads only the two rows it lies between
(`LIMIT 2 OFFSET rank` over the period's completed consultations, which SQLite sorts
itself), and `core.domain.stats.interpolate` does the rest.
"""

from __future__ import annotations

import sqlite3

from core.domain.stats import (
    MAX_MODELS,
    MEDIAN,
    P95,
    ROUNDS_TAIL,
    Period,
    Stats,
    interpolate,
    percentile_rank,
    rounds_distribution,
)
from core.domain.tool_usage import ToolCount, listed
from core.domain.usage import UsageTotal
from storage.sqlite.placeholders import sqlite_sql
from storage.statements.usage import CHATS_BY_MODEL

_STARTED = (
    "SELECT COUNT(*) FROM consultations INDEXED BY consultations_created"
    " WHERE created_at >= ? AND created_at < ?"
)
_ENDED = (
    "SELECT status, COUNT(*), SUM(current_round),"
    " SUM(CASE WHEN current_round < max_rounds THEN 1 ELSE 0 END)"
    " FROM consultations INDEXED BY consultations_ended"
    " WHERE ended_at >= ? AND ended_at < ? GROUP BY status"
)
# Rounds past the tail are counted in its bucket here, so at most ROUNDS_TAIL + 1 rows.
_ROUNDS = (
    "SELECT MIN(MAX(current_round, 0), ?3), COUNT(*)"
    " FROM consultations INDEXED BY consultations_ended"
    " WHERE ended_at >= ?1 AND ended_at < ?2 AND status = 'complete' GROUP BY 1"
)
_PEOPLE = (
    "SELECT COUNT(*) FROM (SELECT scope_key FROM usage_daily"
    " WHERE scope_kind = 'person' AND day BETWEEN ? AND ?"
    " UNION SELECT 'tg:' || started_by FROM consultations INDEXED BY consultations_created"
    " WHERE created_at >= ? AND created_at < ? AND started_by IS NOT NULL)"
)
# Each charge is in its chat's rows exactly once, so the chat scope counts every call once.
_TOTALS = (
    "SELECT SUM(CASE WHEN kind = 'follow_up' THEN calls ELSE 0 END), SUM(prompt_tokens),"
    " SUM(completion_tokens), SUM(cost) FROM usage_daily"
    " WHERE scope_kind = 'chat' AND day BETWEEN ? AND ?"
)
_BY_MODEL = sqlite_sql(CHATS_BY_MODEL)
_TOOL_CALLS = (
    "SELECT tool, SUM(calls), SUM(failed) FROM tool_usage_daily"
    " INDEXED BY tool_usage_daily_kind_day"
    " WHERE scope_kind = 'chat' AND day BETWEEN ? AND ? GROUP BY tool"
)
"""`storage.statements.tool_usage.CHATS_TOOL_CALLS`, the planner told its index."""
_ANSWER_SECONDS = (
    "SELECT ended_at - created_at FROM consultations INDEXED BY consultations_ended"
    " WHERE ended_at >= ? AND ended_at < ? AND status = 'complete'"
    " ORDER BY 1 LIMIT 2 OFFSET ?"
)


def stats_of(db: sqlite3.Connection, period: Period) -> Stats:
    """The period's figures (run inside one read transaction: one snapshot)."""
    times = (period.since, period.until)
    days = (period.since_day, period.until_day)
    started = db.execute(_STARTED, times).fetchone()[0]
    ended = {row[0]: row[1:] for row in db.execute(_ENDED, times)}
    completed, rounds, early = ended.get("complete", (0, 0, 0))
    rounds_rows = db.execute(_ROUNDS, (*times, ROUNDS_TAIL)).fetchall()
    people = db.execute(_PEOPLE, (*days, *times)).fetchone()[0]
    follow_ups, prompt, completion, cost = db.execute(_TOTALS, days).fetchone()
    models = [
        UsageTotal(str(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), float(r[5]))
        for r in db.execute(_BY_MODEL, (*days, MAX_MODELS))
    ]
    tools = [ToolCount(str(r[0]), int(r[1]), int(r[2])) for r in db.execute(_TOOL_CALLS, days)]
    return Stats(
        since_day=period.since_day,
        until_day=period.until_day,
        people=int(people),
        started=int(started),
        completed=int(completed),
        reset=int(ended.get("reset", (0,))[0]),
        expired=int(ended.get("expired", (0,))[0]),
        rounds_used=int(rounds or 0),
        early_finishes=int(early or 0),
        follow_ups=int(follow_ups or 0),
        prompt_tokens=int(prompt or 0),
        completion_tokens=int(completion or 0),
        cost=float(cost or 0.0),
        usage=tuple(models),
        answer_seconds_median=_percentile(db, times, int(completed), MEDIAN),
        answer_seconds_p95=_percentile(db, times, int(completed), P95),
        rounds=rounds_distribution((int(r), int(n)) for r, n in rounds_rows),
        tools=listed(tools),
    )


def _percentile(
    db: sqlite3.Connection, times: tuple[float, float], count: int, fraction: float
) -> float | None:
    if count == 0:
        return None
    rank, weight = percentile_rank(count, fraction)
    values = [float(row[0]) for row in db.execute(_ANSWER_SECONDS, (*times, rank))]
    if not values:  # not reached: the count comes from the same snapshot
        return None
    return interpolate(values[0], values[1] if len(values) > 1 else None, weight)
