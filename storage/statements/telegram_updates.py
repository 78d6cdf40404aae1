"""Telegram update ids (the webhook's de-duplication, table `telegram_updates`), per bot
(`bot`, its scope: two bots' update ids collide, so a row is a bot's id): recording an
id answers "new" in the same write, so two deliveries of one update, even at the same
moment, are answered "new" exactly once. Ids are kept for `KEEP_SECONDS` and at most
`KEEP_IDS` of them per bot; each write deletes what fell out of both bounds through indexes, so it
costs O(log n) and the table never grows past the bounds.
"""

KEEP_SECONDS = 24 * 3600
"""Telegram gives up redelivering an update well within a day."""

KEEP_IDS = 1_000_000
"""update_ids are consecutive, so this keeps the last million (~40 MB at most)."""

DROP_OLD = "DELETE FROM telegram_updates WHERE received_at < $1"
"""Drop the ids received before $1 (the arrival less `KEEP_SECONDS`)."""
DROP_FAR = "DELETE FROM telegram_updates WHERE bot = $1 AND update_id <= $2"
"""Drop the bot's ($1) ids at or below $2 (the id less `KEEP_IDS`): one range of its key."""
