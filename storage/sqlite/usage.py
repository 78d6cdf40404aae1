"""Model usage by UTC day (`core.domain.usage`): charges added to each of their scopes' rows.

Invariants: a charge is added by one UPSERT per scope inside the caller's transaction, so
it is counted exactly when the write it goes with (a reply) commits; so are its tool calls
(`Charge.tools`, one UPSERT per scope and tool into `tool_usage_daily`); in the same
transaction its person's last day charged (`person_activity`) moves forward to the
charge's day, so that row is always the greatest day of the person's usage rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from core.domain.tool_usage import ToolCalls, ToolCount, listed
from core.domain.usage import Charge, ScopeKind, UsageTotal, month_start
from storage.sqlite.placeholders import sqlite_sql
from storage.statements.tool_usage import ADD_TOOL_CALLS, TOOL_CALLS_OF
from storage.statements.usage import TOTALS_BY_MODEL

_ADD = (
    "INSERT INTO usage_daily (scope_kind, scope_key, day, model, kind, prompt_tokens,"
    " completion_tokens, calls, estimated_calls, cost) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)"
    " ON CONFLICT (scope_kind, scope_key, day, model, kind) DO UPDATE SET"
    " prompt_tokens = prompt_tokens + excluded.prompt_tokens,"
    " completion_tokens = completion_tokens + excluded.completion_tokens,"
    " calls = calls + 1, estimated_calls = estimated_calls + excluded.estimated_calls,"
    " cost = cost + excluded.cost"
)
_SEEN = (
    "INSERT INTO person_activity (person, last_day) VALUES (?, ?)"
    " ON CONFLICT (person) DO UPDATE SET last_day = excluded.last_day"
    " WHERE excluded.last_day > last_day"
)
_TOTALS = sqlite_sql(TOTALS_BY_MODEL)
_ADD_TOOL_CALLS = sqlite_sql(ADD_TOOL_CALLS)
_TOOL_CALLS_OF = sqlite_sql(TOOL_CALLS_OF)


def add_usage(db: sqlite3.Connection, charges: Sequence[Charge]) -> None:
    """Add each charge to its scopes' daily rows (in the caller's transaction)."""
    db.executemany(
        _ADD,
        [
            (
                scope.value,
                key,
                charge.day,
                charge.model,
                charge.kind.value,
                charge.usage.prompt_tokens,
                charge.usage.completion_tokens,
                int(charge.usage.estimated),
                charge.cost,
            )
            for charge in charges
            for scope, key in charge.scopes()
        ],
    )
    db.executemany(
        _ADD_TOOL_CALLS,
        [
            (scope.value, key, charge.day, count.tool, count.calls, count.failed)
            for charge in charges
            for scope, key in charge.scopes()
            for count in charge.tools
        ],
    )
    db.executemany(_SEEN, [(charge.person, charge.day) for charge in charges if charge.person])


def usage_of(
    db: sqlite3.Connection, scope: ScopeKind, key: str, since_day: str, until_day: str
) -> list[UsageTotal]:
    rows = db.execute(_TOTALS, (scope.value, key, since_day, until_day)).fetchall()
    return [
        UsageTotal(str(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), float(r[5])) for r in rows
    ]


def tool_calls_of(db: sqlite3.Connection, scope: ScopeKind, key: str, day: str) -> ToolCalls:
    rows = db.execute(_TOOL_CALLS_OF, (scope.value, key, month_start(day), day)).fetchall()
    return ToolCalls(
        today=listed(ToolCount(str(r[0]), int(r[1]), int(r[2])) for r in rows if r[1]),
        month=listed(ToolCount(str(r[0]), int(r[3]), int(r[4])) for r in rows),
    )
