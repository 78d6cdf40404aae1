"""The engine and plans the console reads a stored bot's people by: bot n's person
(`tg<n>:<user>`) has that bot's limits and holds that bot's plans (`app.bot_fleet`), so
their page shows them, not the deployment's.

Invariant: one engine per stored bot in this process, built on the runtime
(`Runtime.engine_for`, `Runtime.sales_for`) from the bot's profile as the bot process
builds it (`app.bot_engines.engine_defaults`) and built again when the profile changed; a
bot not stored (or removed) has none (None), and nothing is built for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.bot_engines import engine_defaults
from core.domain.bots import BotProfile
from core.turns.engine import Engine
from core.turns.plan_sales import PlanSales

if TYPE_CHECKING:
    from app.runtime import Runtime


class ConsoleEngines:
    """`admin.people.BotEngines` on the runtime: the engine and plans of bot `scope`."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._built: dict[int, tuple[BotProfile, Engine, PlanSales | None]] = {}

    async def __call__(self, scope: int) -> tuple[Engine, PlanSales | None] | None:
        bot = next((b for b in await self._runtime.store.bots.bots() if b.id == scope), None)
        if bot is None:
            return None
        built = self._built.get(scope)
        if built is not None and built[0] == bot.profile:
            return built[1], built[2]
        config, quotas, plans = engine_defaults(self._runtime.settings, bot.profile)
        engine = self._runtime.engine_for(config, quotas, scope)
        sales = self._runtime.sales_for(plans, engine)
        self._built[scope] = (bot.profile, engine, sales)
        return engine, sales
