"""The operator's figures day by day (`core.domain.stats.DayFigures`) from one snapshot of the
PostgreSQL database.

Invariants: two aggregate queries per period, whatever its length: the consultations'
starts and ends by day (one statement, each half bounded by an index on the period,
`consultations_created` and `consultations_ended`), and the usage by day
(`usage_daily_kind_day`); run in one read-only REPEATABLE READ transaction. Days with
nothing counted are still listed, with zeros. One bot's days (`scope`) are counted by the
same statements with its key ranges (`storage.statements.bot_scope.only`).
"""

from __future__ import annotations

import asyncpg

from core.domain.stats import DayFigures, Period, daily_figures
from storage.statements.bot_scope import key_ranges, only


def _events(only: str = "") -> str:
    return (
        "SELECT floor((created_at - $1) / 86400)::int AS d, 'started' AS what, COUNT(*) AS n"
        f" FROM consultations WHERE created_at >= $1 AND created_at < $2{only} GROUP BY 1"
        " UNION ALL"
        " SELECT floor((ended_at - $1) / 86400)::int, status, COUNT(*)"
        f" FROM consultations WHERE ended_at >= $1 AND ended_at < $2{only} GROUP BY 1, 2"
    )


# Each charge is in its chat's rows exactly once, so the chat scope counts every call once.
def _usage(only: str = "") -> str:
    return (
        "SELECT day, SUM(prompt_tokens) AS prompt, SUM(completion_tokens) AS completion,"
        " SUM(cost) AS cost FROM usage_daily"
        f" WHERE scope_kind = 'chat' AND day BETWEEN $1 AND $2{only} GROUP BY day"
    )


_EVENTS, _USAGE = _events(), _usage()
_BOT_EVENTS, _BOT_USAGE = _events(only("chat_key", 3)), _usage(only("scope_key", 3))


async def daily_of(
    connection: asyncpg.Connection, period: Period, scope: int | None = None
) -> list[DayFigures]:
    """The period's days, oldest first, from one snapshot: every consultation's, or only
    those of the bot of `scope`."""
    bot = () if scope is None else key_ranges(scope)
    events_sql, usage_sql = (_EVENTS, _USAGE) if scope is None else (_BOT_EVENTS, _BOT_USAGE)
    async with connection.transaction(isolation="repeatable_read", readonly=True):
        events = await connection.fetch(events_sql, period.since, period.until, *bot)
        rows = await connection.fetch(usage_sql, period.since_day, period.until_day, *bot)
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
