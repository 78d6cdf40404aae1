"""Consultation engine: rounds, prompts, context window, answer collection.

Pure logic plus two ports (store, model) declared in `core.domain.ports`. Nothing here
imports Telegram, aiohttp or aiosqlite; `tests/app/test_layering.py` keeps it so.
"""
