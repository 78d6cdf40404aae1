"""The flow of updates: per-chat ordering, the shared inbox, polling, the allow-list and
button data. Imports `bot.transport` only (of the bot)."""
