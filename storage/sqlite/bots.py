"""The bots registry (`core.domain.ports.BotRegistry`) on SQLite: the bots table, read on
the store's reader and written on its writer, each change one transaction
(`storage.sqlite.batch`), so an add that finds the bot stored changes nothing."""

from __future__ import annotations

import functools
import sqlite3

from core.domain.bots import BotExists, BotProfile, NewBot, StoredBot
from storage.bots import bot_from_row, settings_value
from storage.sqlite.batch import BatchedConnection
from storage.sqlite.placeholders import sqlite_sql
from storage.statements.bots import (
    COUNT_BOTS,
    INSERT_BOT,
    REMOVE_BOT,
    REVIVE_BOT,
    SELECT_ALL_BOTS,
    SELECT_BOT,
    SELECT_BOT_BY_TELEGRAM_ID,
    SELECT_BOTS,
    SET_API_TOKEN,
    TOKEN_TAKEN,
    UPDATE_BOT,
)


class SqliteBots:
    """`BotRegistry` on the store's reader and writer connections."""

    def __init__(self, reader: BatchedConnection, writer: BatchedConnection) -> None:
        self._reader = reader
        self._writer = writer

    async def add_bot(self, bot: NewBot, *, at: float) -> StoredBot:
        return await self._writer.run(functools.partial(_add, bot=bot, at=at))

    async def bots(self, *, removed: bool = False) -> list[StoredBot]:
        statement = SELECT_ALL_BOTS if removed else SELECT_BOTS
        return await self._reader.run(
            lambda db: [bot_from_row(row) for row in db.execute(sqlite_sql(statement))]
        )

    async def count_bots(self) -> int:
        return await self._reader.run(
            lambda db: int(db.execute(sqlite_sql(COUNT_BOTS)).fetchone()[0])
        )

    async def update_bot(
        self,
        bot_id: int,
        *,
        at: float,
        enabled: bool | None = None,
        profile: BotProfile | None = None,
        label: str | None = None,
    ) -> StoredBot | None:
        return await self._writer.run(
            functools.partial(
                _update, bot_id=bot_id, at=at, enabled=enabled, profile=profile, label=label
            )
        )

    async def set_bot_api_token(
        self, bot_id: int, token_hash: str | None, *, at: float
    ) -> StoredBot | None:
        return await self._writer.run(
            functools.partial(_set_api_token, bot_id=bot_id, token_hash=token_hash, at=at)
        )

    async def remove_bot(self, bot_id: int, *, at: float) -> bool:
        return await self._writer.run(
            lambda db: (
                db.execute(sqlite_sql(REMOVE_BOT), (bot_id, False, at)).fetchone() is not None
            )
        )


def _add(db: sqlite3.Connection, *, bot: NewBot, at: float) -> StoredBot:
    row = db.execute(sqlite_sql(SELECT_BOT_BY_TELEGRAM_ID), (bot.telegram_id,)).fetchone()
    if row is not None and row[10] is None:
        raise BotExists(bot_from_row(row))
    values = (
        bot.telegram_id,
        bot.username,
        bot.label,
        bot.token_cipher,
        bot.token_tail,
        bot.enabled,
        settings_value(bot.profile),
        at,
    )
    statement = INSERT_BOT if row is None else REVIVE_BOT
    bot_id = int(db.execute(sqlite_sql(statement), values).fetchone()[0])
    return bot_from_row(db.execute(sqlite_sql(SELECT_BOT), (bot_id,)).fetchone())


def _update(
    db: sqlite3.Connection,
    *,
    bot_id: int,
    at: float,
    enabled: bool | None,
    profile: BotProfile | None,
    label: str | None,
) -> StoredBot | None:
    row = db.execute(sqlite_sql(SELECT_BOT), (bot_id,)).fetchone()
    if row is None or row[10] is not None:
        return None
    bot = bot_from_row(row)
    db.execute(
        sqlite_sql(UPDATE_BOT),
        (
            bot_id,
            bot.enabled if enabled is None else enabled,
            settings_value(bot.profile if profile is None else profile),
            bot.label if label is None else label,
            at,
        ),
    )
    return bot_from_row(db.execute(sqlite_sql(SELECT_BOT), (bot_id,)).fetchone())


def _set_api_token(
    db: sqlite3.Connection, *, bot_id: int, token_hash: str | None, at: float
) -> StoredBot | None:
    if token_hash is not None:
        taken = db.execute(sqlite_sql(TOKEN_TAKEN), (token_hash, bot_id)).fetchone()
        if taken is not None:
            raise BotExists(bot_from_row(db.execute(sqlite_sql(SELECT_BOT), taken).fetchone()))
    if db.execute(sqlite_sql(SET_API_TOKEN), (bot_id, token_hash, at)).fetchone() is None:
        return None
    return bot_from_row(db.execute(sqlite_sql(SELECT_BOT), (bot_id,)).fetchone())
