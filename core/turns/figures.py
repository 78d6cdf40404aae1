"""The figures of use: a person's, chat's or API client's usage, the operator's stats, and
the one charge made outside a turn (a voice note's transcription).

Invariants:
- nothing here takes a chat's lock or waits for a running turn: a figure is read from the
  totals committed before it, and a charge is an addition;
- days are whole UTC days by the service's clock (`core.domain.usage.day_of`,
  `core.domain.stats.period_of`), so the figures do not depend on the server's time zone;
- costs are priced by the deployment's prices (`Accounting.prices`); a model without a
  price is named as unpriced, never shown as free;
- a transcription is charged as soon as it is heard, whether or not the turn it makes is
  answered (it was billed either way), and observed like any other charge.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from core.domain.attachments import Transcription
from core.domain.ports import ConsultationStore
from core.domain.stats import DayFigures, Stats, period_of
from core.domain.usage import (
    Accounting,
    Payer,
    ScopeKind,
    UsageReport,
    day_of,
    month_start,
    summarize,
)


class Figures:
    """Usage and stats for the edges (reached as `Engine.figures`)."""

    def __init__(
        self, store: ConsultationStore, accounting: Accounting, clock: Callable[[], float]
    ) -> None:
        self._store = store
        self._accounting = accounting
        self._clock = clock

    async def usage(self, scope: ScopeKind, key: str) -> UsageReport:
        """The usage of a person, chat or API client today and this month, with its tool
        calls by tool: three indexed reads."""
        today = day_of(self._clock())
        store, prices = self._store, self._accounting.prices
        day = await store.usage_of(scope, key, since_day=today, until_day=today)
        month = await store.usage_of(scope, key, since_day=month_start(today), until_day=today)
        tools = await store.tool_calls_of(scope, key, day=today)
        return UsageReport(today, summarize(day, prices), summarize(month, prices), tools)

    async def stats(self, days: int, *, scope: int | None = None) -> Stats:
        """The operator's figures over the last `days` UTC days, today included
        (1 ≤ days ≤ `core.domain.stats.MAX_DAYS`): a handful of indexed reads; every
        consultation's, or (`scope`) one bot's: its Telegram chats' and its API sessions'
        (`core.domain.telegram_keys`, `core.domain.api_keys`)."""
        found = await self._store.stats(period_of(self._clock(), days), scope=scope)
        prices = self._accounting.prices
        unpriced = tuple(u.model for u in found.usage if prices.of(u.model) is None)
        return dataclasses.replace(found, unpriced=unpriced)

    async def daily_stats(self, days: int, *, scope: int | None = None) -> list[DayFigures]:
        """The last `days` UTC days one by one, oldest first, today included (as `stats`
        counts them, `scope` too; 1 ≤ days ≤ `core.domain.stats.MAX_DAYS`): two indexed
        aggregate reads."""
        return await self._store.daily_stats(period_of(self._clock(), days), scope=scope)

    async def charge_transcription(
        self, chat_key: str, heard: Transcription, *, payer: Payer | None = None
    ) -> None:
        """Count a voice note's transcription for the chat and `payer` as soon as it is
        heard: it was billed whether or not the turn it makes is answered."""
        charge = self._accounting.charge_transcription(
            heard, chat=chat_key, payer=payer, at=self._clock()
        )
        await self._store.add_usage([charge])
        self._accounting.observe(charge)
