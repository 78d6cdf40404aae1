"""The operator's figures (`core.domain.stats`) from one snapshot of the PostgreSQL database.

Invariants: a handful of aggregate queries per period, each bounded by an index on the
period (`consultations_created`, `consultations_ended`, `usage_daily_kind_day`,
`tool_usage_daily_kind_day`), never a
row per consultation to the client; run in one read-only REPEATABLE READ transaction, so
all figures of a period come from one snapshot. The percentiles are `percentile_cont`:
linear interpolation between the closest ranks, as `core.domain.stats` defines them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

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
from storage.statements.bot_scope import key_ranges, only
from storage.statements.tool_usage import CHATS_TOOL_CALLS, chats_tool_calls
from storage.statements.usage import CHATS_BY_MODEL, chats_by_model


def _started(only: str = "") -> str:
    return "SELECT COUNT(*) FROM consultations WHERE created_at >= $1 AND created_at < $2" + only


def _ended(only: str = "") -> str:
    return (
        "SELECT status, COUNT(*) AS n, SUM(current_round) AS rounds,"
        " SUM(CASE WHEN current_round < max_rounds THEN 1 ELSE 0 END) AS early,"
        " percentile_cont($3::double precision) WITHIN GROUP (ORDER BY ended_at - created_at)"
        " AS median,"
        " percentile_cont($4::double precision) WITHIN GROUP (ORDER BY ended_at - created_at)"
        f" AS p95 FROM consultations WHERE ended_at >= $1 AND ended_at < $2{only}"
        " GROUP BY status"
    )


def _rounds(only: str = "") -> str:
    """Rounds past the tail are counted in its bucket here, so at most ROUNDS_TAIL + 1 rows."""
    return (
        "SELECT LEAST(GREATEST(current_round, 0), $3) AS rounds, COUNT(*) AS n FROM consultations"
        f" WHERE ended_at >= $1 AND ended_at < $2 AND status = 'complete'{only} GROUP BY 1"
    )


def _people(people: str = "", chats: str = "") -> str:
    """A consultation's starter is a person of its chat's bot: `tg:` or `tg<n>:`, the part
    of its chat key before the first colon."""
    return (
        "SELECT COUNT(*) FROM (SELECT scope_key FROM usage_daily"
        f" WHERE scope_kind = 'person' AND day BETWEEN $1 AND $2{people}"
        " UNION SELECT substr(chat_key, 1, strpos(chat_key, ':')) || started_by"
        " FROM consultations WHERE created_at >= $3 AND created_at < $4"
        f" AND started_by IS NOT NULL{chats}) AS people"
    )


def _totals(only: str = "") -> str:
    """Each charge is in its chat's rows exactly once, so the chat scope counts every call
    once."""
    return (
        "SELECT SUM(CASE WHEN kind = 'follow_up' THEN calls ELSE 0 END) AS follow_ups,"
        " SUM(prompt_tokens) AS prompt, SUM(completion_tokens) AS completion, SUM(cost) AS cost"
        f" FROM usage_daily WHERE scope_kind = 'chat' AND day BETWEEN $1 AND $2{only}"
    )


_STARTED = _started()
_ENDED = _ended()
_ROUNDS = _rounds()
_PEOPLE = _people()
_TOTALS = _totals()


@dataclass(frozen=True, slots=True)
class Queries:
    """The figures' statements, each with its own parameters and then, for one bot's
    figures, its key range (`storage.statements.bot_scope.only`)."""

    started: str = _STARTED
    ended: str = _ENDED
    rounds: str = _ROUNDS
    people: str = _PEOPLE
    totals: str = _TOTALS
    by_model: str = CHATS_BY_MODEL
    tool_calls: str = CHATS_TOOL_CALLS


@functools.cache
def queries(scoped: bool) -> Queries:
    """Every bot's figures' statements, or (`scoped`) one bot's."""
    if not scoped:
        return Queries()
    return Queries(
        started=_started(only("chat_key", 3)),
        ended=_ended(only("chat_key", 5)),
        rounds=_rounds(only("chat_key", 4)),
        people=_people(only("scope_key", 5), only("chat_key", 5)),
        totals=_totals(only("scope_key", 3)),
        by_model=chats_by_model(only("scope_key", 4)),
        tool_calls=chats_tool_calls(only("scope_key", 3)),
    )


async def stats_of(
    connection: asyncpg.Connection, period: Period, scope: int | None = None
) -> Stats:
    """The period's figures, from one snapshot: every consultation's, or only those of the
    bot of `scope` (`core.domain.telegram_keys`)."""
    times = (period.since, period.until)
    days = (period.since_day, period.until_day)
    q = queries(scope is not None)
    bot = () if scope is None else key_ranges(scope)
    async with connection.transaction(isolation="repeatable_read", readonly=True):
        started = await connection.fetchval(q.started, *times, *bot)
        ended_rows = await connection.fetch(q.ended, *times, MEDIAN, P95, *bot)
        ended = {row["status"]: row for row in ended_rows}
        rounds = await connection.fetch(q.rounds, *times, ROUNDS_TAIL, *bot)
        people = await connection.fetchval(q.people, *days, *times, *bot)
        totals = await connection.fetchrow(q.totals, *days, *bot)
        rows = await connection.fetch(q.by_model, *days, MAX_MODELS, *bot)
        tools = await connection.fetch(q.tool_calls, *days, *bot)
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
