"""The bots registry (`core.domain.ports.BotRegistry`) on PostgreSQL: the bots table through
the store's calls on its pool; an add is one transaction that locks the Telegram bot's row
(or, when it has none, is refused by the UNIQUE telegram_id if two adds race), so it is
stored once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import asyncpg

from core.domain.bots import BotExists, BotProfile, NewBot, StoredBot
from storage.bots import bot_from_row, settings_value
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

T = TypeVar("T")


class Run(Protocol):
    """How the store runs work on a connection of its pool (`storage.postgres.calls`)."""

    async def __call__(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T: ...


class PostgresBots:
    """`BotRegistry` through the store's calls (`call`) and transactions (`write`)."""

    def __init__(self, call: Run, write: Run) -> None:
        self._call = call
        self._write = write

    async def add_bot(self, bot: NewBot, *, at: float) -> StoredBot:
        async def work(connection: asyncpg.Connection) -> StoredBot:
            row = await connection.fetchrow(
                f"{SELECT_BOT_BY_TELEGRAM_ID} FOR UPDATE", bot.telegram_id
            )
            if row is not None and row["removed_at"] is None:
                raise BotExists(bot_from_row(tuple(row)))
            statement = INSERT_BOT if row is None else REVIVE_BOT
            try:
                async with connection.transaction():  # a savepoint: the race leaves it usable
                    bot_id = await connection.fetchval(
                        statement,
                        bot.telegram_id,
                        bot.username,
                        bot.label,
                        bot.token_cipher,
                        bot.token_tail,
                        bot.enabled,
                        settings_value(bot.profile),
                        at,
                    )
            except asyncpg.UniqueViolationError:  # another add of the same bot won
                raced = await connection.fetchrow(SELECT_BOT_BY_TELEGRAM_ID, bot.telegram_id)
                raise BotExists(bot_from_row(tuple(raced))) from None
            return bot_from_row(tuple(await connection.fetchrow(SELECT_BOT, bot_id)))

        return await self._write(work)

    async def bots(self, *, removed: bool = False) -> list[StoredBot]:
        statement = SELECT_ALL_BOTS if removed else SELECT_BOTS
        rows = await self._call(lambda c: c.fetch(statement))
        return [bot_from_row(tuple(row)) for row in rows]

    async def count_bots(self) -> int:
        return int(await self._call(lambda c: c.fetchval(COUNT_BOTS)))

    async def update_bot(
        self,
        bot_id: int,
        *,
        at: float,
        enabled: bool | None = None,
        profile: BotProfile | None = None,
        label: str | None = None,
    ) -> StoredBot | None:
        async def work(connection: asyncpg.Connection) -> StoredBot | None:
            row = await connection.fetchrow(f"{SELECT_BOT} FOR UPDATE", bot_id)
            if row is None or row["removed_at"] is not None:
                return None
            bot = bot_from_row(tuple(row))
            await connection.execute(
                UPDATE_BOT,
                bot_id,
                bot.enabled if enabled is None else enabled,
                settings_value(bot.profile if profile is None else profile),
                bot.label if label is None else label,
                at,
            )
            return bot_from_row(tuple(await connection.fetchrow(SELECT_BOT, bot_id)))

        return await self._write(work)

    async def set_bot_api_token(
        self, bot_id: int, token_hash: str | None, *, at: float
    ) -> StoredBot | None:
        async def work(connection: asyncpg.Connection) -> StoredBot | None:
            if token_hash is not None:
                taken = await connection.fetchval(TOKEN_TAKEN, token_hash, bot_id)
                if taken is not None:
                    row = await connection.fetchrow(SELECT_BOT, taken)
                    raise BotExists(bot_from_row(tuple(row)))
            if await connection.fetchval(SET_API_TOKEN, bot_id, token_hash, at) is None:
                return None
            return bot_from_row(tuple(await connection.fetchrow(SELECT_BOT, bot_id)))

        return await self._write(work)

    async def remove_bot(self, bot_id: int, *, at: float) -> bool:
        gone = await self._write(lambda c: c.fetchval(REMOVE_BOT, bot_id, False, at))
        return gone is not None
