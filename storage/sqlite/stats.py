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

import functools
import sqlite3
from dataclasses import dataclass

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
from storage.statements.bot_scope import key_ranges, only
from storage.statements.usage import CHATS_BY_MODEL, chats_by_model


def _started(only: str = "") -> str:
    return sqlite_sql(
        "SELECT COUNT(*) FROM consultations INDEXED BY consultations_created"
        " WHERE created_at >= $1 AND created_at < $2" + only
    )


def _ended(only: str = "") -> str:
    return sqlite_sql(
        "SELECT status, COUNT(*), SUM(current_round),"
        " SUM(CASE WHEN current_round < max_rounds THEN 1 ELSE 0 END)"
        " FROM consultations INDEXED BY consultations_ended"
        f" WHERE ended_at >= $1 AND ended_at < $2{only} GROUP BY status"
    )


def _rounds(only: str = "") -> str:
    """Rounds past the tail are counted in its bucket here, so at most ROUNDS_TAIL + 1 rows."""
    return sqlite_sql(
        "SELECT MIN(MAX(current_round, 0), $3), COUNT(*)"
        " FROM consultations INDEXED BY consultations_ended"
        f" WHERE ended_at >= $1 AND ended_at < $2 AND status = 'complete'{only} GROUP BY 1"
    )


def _people(people: str = "", chats: str = "") -> str:
    """A consultation's starter is a person of its chat's bot: `tg:` or `tg<n>:`, the part
    of its chat key up to the first colon."""
    return sqlite_sql(
        "SELECT COUNT(*) FROM (SELECT scope_key FROM usage_daily"
        f" WHERE scope_kind = 'person' AND day BETWEEN $1 AND $2{people}"
        " UNION SELECT substr(chat_key, 1, instr(chat_key, ':')) || started_by"
        " FROM consultations INDEXED BY consultations_created"
        f" WHERE created_at >= $3 AND created_at < $4 AND started_by IS NOT NULL{chats})"
    )


def _totals(only: str = "") -> str:
    """Each charge is in its chat's rows exactly once, so the chat scope counts every call
    once."""
    return sqlite_sql(
        "SELECT SUM(CASE WHEN kind = 'follow_up' THEN calls ELSE 0 END), SUM(prompt_tokens),"
        " SUM(completion_tokens), SUM(cost) FROM usage_daily"
        f" WHERE scope_kind = 'chat' AND day BETWEEN $1 AND $2{only}"
    )


def _tool_calls(only: str = "") -> str:
    """`storage.statements.tool_usage.chats_tool_calls`, the planner told its index."""
    return sqlite_sql(
        "SELECT tool, SUM(calls), SUM(failed) FROM tool_usage_daily"
        " INDEXED BY tool_usage_daily_kind_day"
        f" WHERE scope_kind = 'chat' AND day BETWEEN $1 AND $2{only} GROUP BY tool"
    )


def _answer_seconds(only: str = "") -> str:
    return sqlite_sql(
        "SELECT ended_at - created_at FROM consultations INDEXED BY consultations_ended"
        f" WHERE ended_at >= $1 AND ended_at < $2 AND status = 'complete'{only}"
        " ORDER BY 1 LIMIT 2 OFFSET $3"
    )


_STARTED = _started()
_ENDED = _ended()
_ROUNDS = _rounds()
_PEOPLE = _people()
_TOTALS = _totals()
_BY_MODEL = sqlite_sql(CHATS_BY_MODEL)
_TOOL_CALLS = _tool_calls()
_ANSWER_SECONDS = _answer_seconds()


@dataclass(frozen=True, slots=True)
class Queries:
    """The figures' statements, each with its own parameters and then, for one bot's
    figures, its key range (`storage.statements.bot_scope.only`)."""

    started: str = _STARTED
    ended: str = _ENDED
    rounds: str = _ROUNDS
    people: str = _PEOPLE
    totals: str = _TOTALS
    by_model: str = _BY_MODEL
    tool_calls: str = _TOOL_CALLS
    answer_seconds: str = _ANSWER_SECONDS


@functools.cache
def queries(scoped: bool) -> Queries:
    """Every bot's figures' statements, or (`scoped`) one bot's."""
    if not scoped:
        return Queries()
    return Queries(
        started=_started(only("chat_key", 3)),
        ended=_ended(only("chat_key", 3)),
        rounds=_rounds(only("chat_key", 4)),
        people=_people(only("scope_key", 5), only("chat_key", 5)),
        totals=_totals(only("scope_key", 3)),
        by_model=sqlite_sql(chats_by_model(only("scope_key", 4))),
        tool_calls=_tool_calls(only("scope_key", 3)),
        answer_seconds=_answer_seconds(only("chat_key", 4)),
    )


def stats_of(db: sqlite3.Connection, period: Period, scope: int | None = None) -> Stats:
    """The period's figures (run inside one read transaction: one snapshot): every
    consultation's, or only those of the bot of `scope` (`core.domain.telegram_keys`)."""
    times = (period.since, period.until)
    days = (period.since_day, period.until_day)
    q = queries(scope is not None)
    bot = () if scope is None else key_ranges(scope)
    started = db.execute(q.started, (*times, *bot)).fetchone()[0]
    ended = {row[0]: row[1:] for row in db.execute(q.ended, (*times, *bot))}
    completed, rounds, early = ended.get("complete", (0, 0, 0))
    rounds_rows = db.execute(q.rounds, (*times, ROUNDS_TAIL, *bot)).fetchall()
    people = db.execute(q.people, (*days, *times, *bot)).fetchone()[0]
    follow_ups, prompt, completion, cost = db.execute(q.totals, (*days, *bot)).fetchone()
    models = [
        UsageTotal(str(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), float(r[5]))
        for r in db.execute(q.by_model, (*days, MAX_MODELS, *bot))
    ]
    tool_rows = db.execute(q.tool_calls, (*days, *bot))
    tools = [ToolCount(str(r[0]), int(r[1]), int(r[2])) for r in tool_rows]
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
        answer_seconds_median=_percentile(db, q, (*times, *bot), int(completed), MEDIAN),
        answer_seconds_p95=_percentile(db, q, (*times, *bot), int(completed), P95),
        rounds=rounds_distribution((int(r), int(n)) for r, n in rounds_rows),
        tools=listed(tools),
    )


def _percentile(
    db: sqlite3.Connection, q: Queries, times: tuple[object, ...], count: int, fraction: float
) -> float | None:
    """`times` is the period, then for one bot its key range."""
    if count == 0:
        return None
    rank, weight = percentile_rank(count, fraction)
    period, bot = times[:2], times[2:]
    values = [float(row[0]) for row in db.execute(q.answer_seconds, (*period, rank, *bot))]
    if not values:  # not reached: the count comes from the same snapshot
        return None
    return interpolate(values[0], values[1] if len(values) > 1 else None, weight)
