"""The engine and plans the console reads a stored bot's people by: bot n's person
(`tg<n>:<user>`) has that bot's limits and holds that bot's plans (`app.bot_fleet`), so
their page shows them, not the deployment's.

Invariant: the engine is the one the HTTP API serves the bot with too
(`Runtime.stored_bot_engine`: one per stored bot in this process, built again when its
profile changed); a bot not stored (or removed) has none (None), and nothing is built
for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.turns.engine import Engine
from core.turns.plan_sales import PlanSales

if TYPE_CHECKING:
    from app.runtime import Runtime


class ConsoleEngines:
    """`admin.people.BotEngines` on the runtime: the engine and plans of bot `scope`."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def __call__(self, scope: int) -> tuple[Engine, PlanSales | None] | None:
        bot = next((b for b in await self._runtime.store.bots.bots() if b.id == scope), None)
        if bot is None:
            return None
        return self._runtime.stored_bot_engine(bot)
