"""The terminal: the same consultation as the bot, in a terminal, against the
configured model (`consultation-bot console`)."""
