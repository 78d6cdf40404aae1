"""The figures of plans sold in Telegram Stars that /stats, `GET /api/stats` and the
console's dashboard show: every bot's payments (PLANS' and stored bots' own plans), or one
bot's (`scope`, `core.domain.telegram_keys`).

Invariant: figures are given (not None) whenever the period had a payment, a plan is
active, or a bot sells plans (`sells`), so a deployment whose only sellers are stored bots
shows them as one selling PLANS does; two indexed reads, and `sells` asked only when both
found nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from core.domain.payments import SalesFigures
from core.domain.stats import period_of

if TYPE_CHECKING:
    from core.domain.ports import PaymentBook

Sells = Callable[[int | None], Awaitable[bool]]
"""Whether bot `scope` sells plans (None: whether any bot does)."""


class StarsFigures:
    """Stars by UTC day and plans active, from the payment book."""

    def __init__(self, book: PaymentBook, clock: Callable[[], float], *, sells: Sells) -> None:
        self._book = book
        self._clock = clock
        self._sells = sells

    async def figures(self, days: int, *, scope: int | None = None) -> SalesFigures | None:
        """Stars by UTC day over the last `days` days (today included) and the plans active
        now, of bot `scope`'s people (None: everyone's); None when there is nothing to show
        (see the module's invariant)."""
        now = self._clock()
        period = period_of(now, days)
        found = await self._book.stars_by_day(period.since, period.until, scope=scope)
        active = await self._book.active_plans(now, scope=scope)
        if not found and not active and not await self._sells(scope):
            return None
        return SalesFigures(tuple(found), active, period.since_day, period.until_day)
