"""The engines the HTTP API runs each bot's requests on (`api.bots.BotEngines`).

Invariants: the deployment's own bot (scope 0) is the runtime's engine; each enabled bot
of the bots table has one of its own (`Runtime.stored_bot_engine`, shared with the
console: the bot's id its scope, its settings as `app.bot_engines` gives them), built on
first use and again when its settings change. The table is read at most every
`FRESH_SECONDS`, and again at once when a request names a bot not known yet, so a bot
added is served at once and one disabled, removed or changed is served so no longer, or
with its new settings, within `FRESH_SECONDS`. A bot's API token (`pinned`) is looked up
among the bots read, the table read again only once that reading is `FRESH_SECONDS` old
— never for each unknown token — so a token set or taken away takes effect within that.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Callable

from api.bots import BotRef, ServedBot
from app.runtime import Runtime
from core.domain.bots import StoredBot
from core.domain.telegram_keys import DEFAULT_SCOPE
from core.turns.engine import Engine

FRESH_SECONDS = 5.0
"""How long the API trusts its reading of the bots table (as often as the fleet reads it)."""


class ApiBots:
    """The bots the HTTP API serves, each with its engine (`api.bots.BotEngines`)."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        fresh_seconds: float = FRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._runtime = runtime
        self._own = ServedBot(DEFAULT_SCOPE, runtime.engine)
        self._fresh_seconds = fresh_seconds
        self._clock = clock
        self._read_at: float | None = None
        self._bots: list[StoredBot] = []
        self._reading = asyncio.Lock()

    async def served(self, ref: BotRef) -> ServedBot | None:
        """The enabled bot `ref` names with its engine; None when none does."""
        if ref == DEFAULT_SCOPE:
            return self._own
        bot = None if self._stale() else self._find(ref)
        if bot is None:
            await self._read()
            bot = self._find(ref)
        if bot is None:
            return None
        return ServedBot(bot.id, self._engine_of(bot))

    async def pinned(self, token_digest: str) -> int | None:
        """The enabled bot whose API token has this SHA-256 (hex); None for none."""
        if self._stale():
            await self._read()
        for bot in self._bots:
            if bot.api_token_hash is not None and hmac.compare_digest(
                bot.api_token_hash, token_digest
            ):
                return bot.id
        return None

    def _stale(self) -> bool:
        return self._read_at is None or self._clock() - self._read_at >= self._fresh_seconds

    async def _read(self) -> None:
        async with self._reading:
            bots = await self._runtime.store.bots.bots()
            self._bots = [bot for bot in bots if bot.enabled and bot.removed_at is None]
            self._read_at = self._clock()

    def _find(self, ref: BotRef) -> StoredBot | None:
        for bot in self._bots:
            if bot.id == ref if isinstance(ref, int) else bot.username.lower() == ref.lower():
                return bot
        return None

    def _engine_of(self, bot: StoredBot) -> Engine:
        engine, _ = self._runtime.stored_bot_engine(bot)
        return engine
