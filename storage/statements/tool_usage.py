"""The statements on tool calls by day (`tool_usage_daily`, `core.domain.tool_usage`) that
both stores run. A scope's days are one key range of the table's primary key (scope kind,
scope key, day, tool); a period's chats are a range of `tool_usage_daily_kind_day`."""

ADD_TOOL_CALLS = (
    "INSERT INTO tool_usage_daily (scope_kind, scope_key, day, tool, calls, failed)"
    " VALUES ($1, $2, $3, $4, $5, $6)"
    " ON CONFLICT (scope_kind, scope_key, day, tool) DO UPDATE SET"
    " calls = tool_usage_daily.calls + excluded.calls,"
    " failed = tool_usage_daily.failed + excluded.failed"
)
"""One tool's calls ($5, $6 of them failed) added to a scope's day."""

TOOL_CALLS_OF = (
    "SELECT tool, SUM(CASE WHEN day = $4 THEN calls ELSE 0 END),"
    " SUM(CASE WHEN day = $4 THEN failed ELSE 0 END), SUM(calls), SUM(failed)"
    " FROM tool_usage_daily WHERE scope_kind = $1 AND scope_key = $2 AND day BETWEEN $3 AND $4"
    " GROUP BY tool"
)
"""A scope's calls and failed calls per tool on day $4, then over days $3 to $4: one range
of the primary key (in no order: the caller orders the tools by code point)."""


def chats_tool_calls(only: str = "") -> str:
    """Every chat's calls per tool over days $1 to $2 (each call is in its chat's rows
    exactly once, so the chat scope counts every call once), in no order; `only` adds a
    condition on the rows (one bot's chats: `storage.statements.bot_scope.only`, $3)."""
    return (
        "SELECT tool, SUM(calls), SUM(failed) FROM tool_usage_daily"
        f" WHERE scope_kind = 'chat' AND day BETWEEN $1 AND $2{only} GROUP BY tool"
    )


CHATS_TOOL_CALLS = chats_tool_calls()
"""Every chat's calls per tool (`chats_tool_calls`)."""

MOVE_CHAT_TOOL_CALLS = (
    "INSERT INTO tool_usage_daily (scope_kind, scope_key, day, tool, calls, failed)"
    " SELECT scope_kind, $2, day, tool, calls, failed FROM tool_usage_daily"
    " WHERE scope_kind = 'chat' AND scope_key = $1"
    " ON CONFLICT (scope_kind, scope_key, day, tool) DO UPDATE SET"
    " calls = tool_usage_daily.calls + excluded.calls,"
    " failed = tool_usage_daily.failed + excluded.failed"
)
"""A re-keyed chat's tool calls ($1 the old key, $2 the new), added to the new key's of the
same day and tool; `DELETE_CHAT_TOOL_CALLS` then drops the old rows."""

DELETE_CHAT_TOOL_CALLS = "DELETE FROM tool_usage_daily WHERE scope_kind = 'chat' AND scope_key = $1"
"""A chat's tool calls (forgetting the chat, or after moving them)."""

DELETE_PERSON_TOOL_CALLS = (
    "DELETE FROM tool_usage_daily WHERE scope_kind = 'person' AND scope_key = $1"
)
"""A person's tool calls (forgetting the person: a tool's name can say what they looked up)."""
