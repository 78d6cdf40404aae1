"""The statements on usage that both stores run."""

MOVE_CHAT_USAGE = (
    "INSERT INTO usage_daily (scope_kind, scope_key, day, model, kind, prompt_tokens,"
    " completion_tokens, calls, estimated_calls, cost)"
    " SELECT scope_kind, $2, day, model, kind, prompt_tokens, completion_tokens, calls,"
    " estimated_calls, cost FROM usage_daily WHERE scope_kind = 'chat' AND scope_key = $1"
    " ON CONFLICT (scope_kind, scope_key, day, model, kind) DO UPDATE SET"
    " prompt_tokens = usage_daily.prompt_tokens + excluded.prompt_tokens,"
    " completion_tokens = usage_daily.completion_tokens + excluded.completion_tokens,"
    " calls = usage_daily.calls + excluded.calls,"
    " estimated_calls = usage_daily.estimated_calls + excluded.estimated_calls,"
    " cost = usage_daily.cost + excluded.cost"
)
"""A re-keyed chat's daily usage ($1 the old key, $2 the new), added to the new key's rows
of the same day, model and kind; `MOVE_CHAT_USAGE_DELETE` then drops the old rows."""

MOVE_CHAT_USAGE_DELETE = "DELETE FROM usage_daily WHERE scope_kind = 'chat' AND scope_key = $1"

TOTALS_BY_MODEL = (
    "SELECT model, SUM(prompt_tokens), SUM(completion_tokens), SUM(calls),"
    " SUM(estimated_calls), SUM(cost) FROM usage_daily"
    " WHERE scope_kind = $1 AND scope_key = $2 AND day BETWEEN $3 AND $4"
    " GROUP BY model ORDER BY model"
)
"""A scope's usage per model over days $3 to $4."""


def chats_by_model(only: str = "") -> str:
    """Every chat's usage per model over days $1 to $2, the costliest $3 models (the
    figures: each charge is in its chat's rows exactly once, so the chat scope counts every
    call once); `only` adds a condition on the rows (one bot's chats:
    `storage.statements.bot_scope.only("scope_key", 4)`)."""
    return (
        "SELECT model, SUM(prompt_tokens), SUM(completion_tokens), SUM(calls),"
        " SUM(estimated_calls), SUM(cost) FROM usage_daily"
        f" WHERE scope_kind = 'chat' AND day BETWEEN $1 AND $2{only}"
        " GROUP BY model ORDER BY SUM(cost) DESC, model LIMIT $3"
    )


CHATS_BY_MODEL = chats_by_model()
"""Every chat's usage per model (`chats_by_model`)."""
