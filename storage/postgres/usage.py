"""Model usage by UTC day (`core.domain.usage`): charges added to each of their scopes' rows.

Invariants:
- A charge is added by an UPSERT that sums in the database (`ADD_USAGE_FROM`), so workers
  adding to one row at once each add their part; the rows of one statement are grouped
  first (a statement may not touch a row twice) and written in key order, so two
  statements never wait for each other in a circle.
- A reply's charge is written by the statement that stores the reply
  (`storage.postgres.sql`): counted exactly when the reply commits, no extra round trip.
- The same statement moves its people's last day charged (`person_activity`) forward to
  the charges' day (`charge_items`), so that row is always the greatest day of the
  person's usage rows; a row already at that day is left unwritten.
- It adds the charges' tool calls (`Charge.tools`, carried as JSON in `u_tools`) to their
  scopes' `tool_usage_daily` rows too, grouped and in key order as usage's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import asyncpg

from core.domain.tool_usage import ToolCalls, ToolCount, listed
from core.domain.usage import Charge, ScopeKind, UsageTotal, month_start
from storage.statements.tool_usage import TOOL_CALLS_OF
from storage.statements.usage import TOTALS_BY_MODEL

CHARGE_COLUMNS = (
    "u_day, u_person, u_chat, u_client, u_model, u_kind, u_prompt, u_completion,"
    " u_estimated, u_cost, u_tools"
)
CHARGE_TYPES = (
    "text", "text", "text", "text", "text", "text", "bigint", "bigint", "integer",
    "double precision", "text",
)  # fmt: skip
_SCOPES = (
    " CROSS JOIN LATERAL (VALUES ('person', u.u_person), ('chat', u.u_chat),"
    " ('client', u.u_client)) AS s (scope_kind, scope_key)"
)


def add_usage_from(source: str) -> str:
    """An INSERT adding the charges of `source` (rows with `CHARGE_COLUMNS`, `u_day` NULL
    for none) to their scopes' daily totals; usable as a data-modifying WITH item."""
    return (
        "INSERT INTO usage_daily (scope_kind, scope_key, day, model, kind, prompt_tokens,"
        " completion_tokens, calls, estimated_calls, cost)"
        " SELECT s.scope_kind, s.scope_key, u.u_day, u.u_model, u.u_kind, SUM(u.u_prompt),"
        " SUM(u.u_completion), COUNT(*), SUM(u.u_estimated), SUM(u.u_cost)"
        f" FROM ({source}) AS u{_SCOPES}"
        " WHERE u.u_day IS NOT NULL AND s.scope_key <> ''"
        " GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5"
        " ON CONFLICT (scope_kind, scope_key, day, model, kind) DO UPDATE SET"
        " prompt_tokens = usage_daily.prompt_tokens + EXCLUDED.prompt_tokens,"
        " completion_tokens = usage_daily.completion_tokens + EXCLUDED.completion_tokens,"
        " calls = usage_daily.calls + EXCLUDED.calls,"
        " estimated_calls = usage_daily.estimated_calls + EXCLUDED.estimated_calls,"
        " cost = usage_daily.cost + EXCLUDED.cost"
    )


def add_tool_calls_from(source: str) -> str:
    """An INSERT adding the tool calls of the charges of `source` (`u_tools`: a JSON array
    of `{"tool", "calls", "failed"}`, NULL for none) to their scopes' daily counts."""
    return (
        "INSERT INTO tool_usage_daily (scope_kind, scope_key, day, tool, calls, failed)"
        " SELECT s.scope_kind, s.scope_key, u.u_day, t.tool, SUM(t.calls), SUM(t.failed)"
        f" FROM ({source}) AS u{_SCOPES}"
        " CROSS JOIN LATERAL jsonb_to_recordset(u.u_tools::jsonb)"
        " AS t (tool text, calls bigint, failed bigint)"
        " WHERE u.u_day IS NOT NULL AND s.scope_key <> ''"
        " GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
        " ON CONFLICT (scope_kind, scope_key, day, tool) DO UPDATE SET"
        " calls = tool_usage_daily.calls + EXCLUDED.calls,"
        " failed = tool_usage_daily.failed + EXCLUDED.failed"
    )


def note_people_from(source: str) -> str:
    """An INSERT moving the last day charged of the people of `source` (as in
    `add_usage_from`) forward to their charges' day; rows in key order, as usage's."""
    return (
        "INSERT INTO person_activity (person, last_day)"
        f" SELECT u.u_person, MAX(u.u_day) FROM ({source}) AS u"
        " WHERE u.u_day IS NOT NULL AND u.u_person <> '' GROUP BY 1 ORDER BY 1"
        " ON CONFLICT (person) DO UPDATE SET last_day = EXCLUDED.last_day"
        " WHERE person_activity.last_day < EXCLUDED.last_day"
    )


def charge_items(source: str) -> str:
    """The data-modifying WITH items (`counted`, `seen`, `tooled`) adding the charges of
    `source` to usage, their people's last day charged and their tool calls; always in
    this order in every statement, so two statements lock the rows in the same order."""
    return (
        f"counted AS ({add_usage_from(source)}), seen AS ({note_people_from(source)}),"
        f" tooled AS ({add_tool_calls_from(source)})"
    )


def charge_values(charge: Charge | None) -> tuple[object, ...]:
    """A charge as the `CHARGE_COLUMNS` parameters (all NULL for none)."""
    if charge is None:
        return (None,) * len(CHARGE_TYPES)
    return (
        charge.day,
        charge.person,
        charge.chat,
        charge.client,
        charge.model,
        charge.kind.value,
        charge.usage.prompt_tokens,
        charge.usage.completion_tokens,
        int(charge.usage.estimated),
        charge.cost,
        _tools_json(charge),
    )


def _tools_json(charge: Charge) -> str | None:
    """The charge's tool calls as `u_tools` (None for none)."""
    if not charge.tools:
        return None
    counts = [{"tool": c.tool, "calls": c.calls, "failed": c.failed} for c in charge.tools]
    return json.dumps(counts)


def _unnest(first: int) -> str:
    """`unnest` of the charge columns as parameters `$first`…, typed as arrays."""
    arrays = ", ".join(f"${first + n}::{t}[]" for n, t in enumerate(CHARGE_TYPES))
    return f"SELECT * FROM unnest({arrays}) AS c ({CHARGE_COLUMNS})"


_ADD_USAGE = f"WITH {charge_items(_unnest(1))} SELECT 1"


async def add_usage(connection: asyncpg.Connection, charges: Sequence[Charge]) -> None:
    columns = [list(column) for column in zip(*map(charge_values, charges), strict=True)]
    await connection.execute(_ADD_USAGE, *columns)


async def usage_of(
    connection: asyncpg.Connection, scope: ScopeKind, key: str, since_day: str, until_day: str
) -> list[UsageTotal]:
    rows = await connection.fetch(TOTALS_BY_MODEL, scope.value, key, since_day, until_day)
    return [
        UsageTotal(str(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), float(r[5])) for r in rows
    ]


async def tool_calls_of(
    connection: asyncpg.Connection, scope: ScopeKind, key: str, day: str
) -> ToolCalls:
    rows = await connection.fetch(TOOL_CALLS_OF, scope.value, key, month_start(day), day)
    return ToolCalls(
        today=listed(ToolCount(str(r[0]), int(r[1]), int(r[2])) for r in rows if r[1]),
        month=listed(ToolCount(str(r[0]), int(r[3]), int(r[4])) for r in rows),
    )
