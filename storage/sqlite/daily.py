"""The operator's figures day by day (`core.domain.stats.DayFigures`) from one read snapshot of
the SQLite file.

Invariants: two aggregate queries per period, whatever its length: the consultations'
starts and ends by day (one statement, each half searching an index on the period,
`consultations_created` and `consultations_ended`, named with INDEXED BY), and the
usage by day (`usage_daily_kind_day`); never a row per consultation into Python. Days
with nothing counted are still listed, with zeros. One bot's days (`scope`) are counted by
the same statements with its key ranges (`storage.statements.bot_scope.only`).
"""

from __future__ import annotations

import sqlite3

from core.domain.stats import DayFigures, Period, daily_figures
from storage.sqlite.placeholders import sqlite_sql
from storage.statements.bot_scope import key_ranges, only


def _events(only: str = "") -> str:
    return (
        "SELECT CAST((created_at - ?1) / 86400 AS INTEGER), 'started', COUNT(*)"
        " FROM consultations INDEXED BY consultations_created"
        f" WHERE created_at >= ?1 AND created_at < ?2{only} GROUP BY 1"
        " UNION ALL"
        " SELECT CAST((ended_at - ?1) / 86400 AS INTEGER), status, COUNT(*)"
        " FROM consultations INDEXED BY consultations_ended"
        f" WHERE ended_at >= ?1 AND ended_at < ?2{only} GROUP BY 1, 2"
    )


# Each charge is in its chat's rows exactly once, so the chat scope counts every call once.
def _usage(only: str = "") -> str:
    return (
        "SELECT day, SUM(prompt_tokens), SUM(completion_tokens), SUM(cost) FROM usage_daily"
        f" WHERE scope_kind = 'chat' AND day BETWEEN ?1 AND ?2{only} GROUP BY day"
    )


_EVENTS, _USAGE = _events(), _usage()
_BOT_EVENTS = _events(sqlite_sql(only("chat_key", 3)))
_BOT_USAGE = _usage(sqlite_sql(only("scope_key", 3)))


def daily_of(db: sqlite3.Connection, period: Period, scope: int | None = None) -> list[DayFigures]:
    """The period's days, oldest first (run inside one read transaction: one snapshot):
    every consultation's, or only those of the bot of `scope`."""
    bot = () if scope is None else key_ranges(scope)
    events_sql, usage_sql = (_EVENTS, _USAGE) if scope is None else (_BOT_EVENTS, _BOT_USAGE)
    events = [
        (int(index), str(what), int(count))
        for index, what, count in db.execute(events_sql, (period.since, period.until, *bot))
    ]
    usage = [
        (str(row[0]), int(row[1] or 0), int(row[2] or 0), float(row[3] or 0.0))
        for row in db.execute(usage_sql, (period.since_day, period.until_day, *bot))
    ]
    return daily_figures(period, events, usage)
