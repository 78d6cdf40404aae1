"""Talking to Telegram: chats and targets, delivery and progress, rendering, flood
control, files, keyboards, menus and the bot's settings. The bottom floor of the bot."""
