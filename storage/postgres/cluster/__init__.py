"""What several bot workers sharing one PostgreSQL database coordinate through it: the
inbox of accepted updates and its dead letters, chat claims and polling leadership,
per-user rate limits, Telegram's flood waits and replies not yet delivered. These serve
the bot's ports, not the consultation store."""
