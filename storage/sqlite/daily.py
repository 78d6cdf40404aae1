"""The operator's figures day by day (`core.domain.stats.DayFigures`) from one read snapshot of
the SQLite file.

Invariants: two aggregate queries per period, whatever its length: the consultations'
starts and ends by day (one statement, each half searching an index on the period,
`consultations_created` and `consultations_ended`, named with INDEXED BY), and the
usage by day (`usage_daily_kind_day`); never a row per consultation into Python. Days
with nothing counted are still listed, with zeros.
"""

from __future__ import annotations

import sqlite3

from core.domain.stats import DayFigures, Period, daily_figures

_EVENTS = (
    "SELECT CAST((created_at - ?1) / 86400 AS INTEGER), 'started', COUNT(*)"
    " FROM consultations INDEXED BY consultations_created"
    " WHERE created_at >= ?1 AND created_at < ?2 GROUP BY 1"
    " UNION ALL"
    " SELECT CAST((ended_at - ?1) / 86400 AS INTEGER), status, COUNT(*)"
    " FROM consultations INDEXED BY consultations_ended"
    " WHERE ended_at >= ?1 AND ended_at < ?2 GROUP BY 1, 2"
)
# Each charge is in its chat's rows exactly once, so the chat scope counts every call once.
_USAGE = (
    "SELECT day, SUM(prompt_tokens), SUM(completion_tokens), SUM(cost) FROM usage_daily"
    " WHERE scope_kind = 'chat' AND day BETWEEN ?1 AND ?2 GROUP BY day"
)


def daily_of(db: sqlite3.Connection, period: Period) -> list[DayFigures]:
    """The period's days, oldest first (run inside one read transaction: one snapshot)."""
    events = [
        (int(index), str(what), int(count))
        for index, what, count in db.execute(_EVENTS, (period.since, period.until))
    ]
    usage = [
        (str(row[0]), int(row[1] or 0), int(row[2] or 0), float(row[3] or 0.0))
        for row in db.execute(_USAGE, (period.since_day, period.until_day))
    ]
    return daily_figures(period, events, usage)
