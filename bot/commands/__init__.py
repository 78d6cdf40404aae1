"""What the bot does with each update: one module per command or press family, and the
consultation's turns. Imports `bot.updates` and `bot.transport` (of the bot)."""
