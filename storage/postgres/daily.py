"""The operator's figures day by day (`core.domain.stats.DayFigures`) from one snapshot of the
PostgreSQL database.

Invariants: two aggregate queries per period, whatever its length: the consultations'
starts and ends by day (one statement, each half bounded by an index on the period,
`consultations_created` and `consultations_ended`), and the usage by day
(`usage_daily_kind_day`); run in one read-only REPEATABLE READ transaction. Days with
nothing counted are still listed, with zeros.
"""

from __future__ import annotations

import asyncpg

from core.domain.stats import DayFigures, Period, daily_figures

_EVENTS = (
    "SELECT floor((created_at - $1) / 86400)::int AS d, 'started' AS what, COUNT(*) AS n"
    " FROM consultations WHERE created_at >= $1 AND created_at < $2 GROUP BY 1"
    " UNION ALL"
    " SELECT floor((ended_at - $1) / 86400)::int, status, COUNT(*)"
    " FROM consultations WHERE ended_at >= $1 AND ended_at < $2 GROUP BY 1, 2"
)
# Each charge is in its chat's rows exactly once, so the chat scope counts every call once.
_USAGE = (
    "SELECT day, SUM(prompt_tokens) AS prompt, SUM(completion_tokens) AS completion,"
    " SUM(cost) AS cost FROM usage_daily"
    " WHERE scope_kind = 'chat' AND day BETWEEN $1 AND $2 GROUP BY day"
)


async def daily_of(connection: asyncpg.Connection, period: Period) -> list[DayFigures]:
    """The period's days, oldest first, from one snapshot."""
    async with connection.transaction(isolation="repeatable_read", readonly=True):
        events = await connection.fetch(_EVENTS, period.since, period.until)
        rows = await connection.fetch(_USAGE, period.since_day, period.until_day)
    return daily_figures(
        period,
        [(int(row["d"]), str(row["what"]), int(row["n"])) for row in events],
        [
            (
                str(row["day"]),
                int(row["prompt"] or 0),
                int(row["completion"] or 0),
                float(row["cost"] or 0),
            )
            for row in rows
        ],
    )
