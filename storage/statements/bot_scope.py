"""The statements on one bot's data that both stores run: forgetting a bot, and the
condition that keeps its rows in the operator's figures.

Invariant: a bot's rows are found exactly. Rows keyed by a chat, person or group-owner
key are the bot's when the key starts with one of its two key ranges (`key_ranges`): its
Telegram keys' (`core.domain.telegram_keys`: `tg:` for scope 0, `tg2:` for scope 2) and
its HTTP API keys' (`core.domain.api_keys`: `api:` for scope 0, `api2:` for scope 2); no
range is a prefix of another's keys. Each is tested by `starts` with the range as a
parameter; rows keyed by Telegram's own ids carry the bot in their `bot` column (m032). A
key of the terminal is no bot's.
"""

from core.domain import api_keys, telegram_keys


def key_ranges(scope: int) -> tuple[str, str]:
    """The bot's two key ranges, as the parameters `only` and the forgetting take them:
    its Telegram keys', then its API keys'."""
    return telegram_keys.key_range(scope), api_keys.key_range(scope)


def starts(column: str, at: int) -> str:
    """`column` starts with the text of parameter `at` (a key range), read the same way by
    both stores (no LIKE: its wildcards and case rules differ)."""
    value = f"CAST(${at} AS TEXT)"
    return f"substr({column}, 1, length({value})) = {value}"


def only(column: str, at: int) -> str:
    """A condition to add to a statement's WHERE: the rows of the bot whose key ranges
    (`key_ranges`) are parameters `at` and `at + 1` (the operator's figures of one bot)."""
    return f" AND ({starts(column, at)} OR {starts(column, at + 1)})"


FORGET_CONSULTATIONS = f"DELETE FROM consultations WHERE {starts('chat_key', 1)}"
"""The bot's consultations of one key range ($1; run once per range of `key_ranges`); their
messages and idempotency keys go by ON DELETE CASCADE."""

KEYED_ROWS = (
    ("chat_settings", "chat_key"),
    ("memory_facts", "owner"),
    ("memory_preferences", "person"),
    ("usage_daily", "scope_key"),
    ("tool_usage_daily", "scope_key"),
    ("consultation_starts", "person"),
    ("quota_overrides", "person"),
    ("quota_holds", "person"),
    ("person_languages", "person"),
    ("person_activity", "person"),
    ("blocked_people", "person"),
)
"""The tables whose rows a chat or person key names, and that key's column."""

FORGET_KEYED = tuple(
    f"DELETE FROM {table} WHERE {starts(column, 1)}" for table, column in KEYED_ROWS
)
"""Each deletes the bot's rows of one key range ($1; run once per range of `key_ranges`)
of one table of `KEYED_ROWS`."""

BOT_ROWS = ("telegram_updates", "round_keyboards")
"""The store's tables keyed by Telegram's own ids, with the bot in `bot` (both stores)."""

FORGET_BOT_ROWS = tuple(f"DELETE FROM {table} WHERE bot = $1" for table in BOT_ROWS)
"""Each deletes the bot's ($1 its scope) rows of one table of `BOT_ROWS`."""
