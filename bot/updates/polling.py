"""Polling Telegram when several workers share one database: exactly one of them polls.

Invariants:
- Only the leader calls getUpdates (Telegram allows one poller per bot): leadership is a
  lock across processes (`Leadership`) that lives as long as the leader's connection to
  the database, so a leader that dies frees it and a follower, trying every
  `retry_interval` seconds, takes over within seconds.
- Every update is handed to the sink (the shared inbox) before the offset moves past it
  (the updates of one getUpdates are handed over together, so the sink can commit them
  at once; the offset moves past the ones before the first the sink did not take):
  getUpdates acknowledges an update only when a later call names a higher offset, so an
  update the sink did not take is fetched again. A new leader starts from Telegram's
  oldest unacknowledged update; the ones its predecessor already queued are refused by
  the sink as redeliveries, so none is lost and none is queued twice.
- A leader checks that it still leads before each getUpdates; one that lost its lock
  connection stops polling and becomes a follower.
- The loop outlives any failure of a step (the database down, anything unexpected): it
  is logged and the step made again with back-off (`telemetry.supervision`), a leader
  keeping its offset.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from telegram import Bot, Update
from telegram.error import Conflict, TelegramError

from core.domain.errors import StoreUnavailable
from telemetry.supervision import LoopRegistry, Pace, supervise

log = logging.getLogger(__name__)

POLL_TIMEOUT = 30
RETRY_INTERVAL = 2.0
PAUSE_AFTER_ERROR = 1.0
MAX_RETRY = 30.0  # the longest wait between steps while they fail
LONGEST_EXTRA = 70.0  # a step may take this much longer than getUpdates' own timeout

UpdateSink = Callable[[dict[str, Any], Update], Awaitable[bool]]
"""Commits an update (its JSON object and its parsed form) for handling; False for a
redelivery."""


class Leadership(Protocol):
    """One leader among processes (`storage.postgres.cluster.locks.PostgresLeadership`)."""

    async def try_acquire(self) -> bool: ...
    async def held(self) -> bool: ...


class PollingLeader:
    """`run()` until cancelled: follow, lead when leadership is free, poll while leading."""

    def __init__(
        self,
        bot: Bot,
        sink: UpdateSink,
        leadership: Leadership,
        *,
        poll_timeout: int = POLL_TIMEOUT,
        allowed_updates: Sequence[str] = Update.ALL_TYPES,
        retry_interval: float = RETRY_INTERVAL,
        loops: LoopRegistry | None = None,
    ) -> None:
        """Each step (an attempt to lead, or one getUpdates) reports to `loops` as the loop
        "polling" (what `/healthz` reads)."""
        self._bot = bot
        self._sink = sink
        self._leadership = leadership
        self._poll_timeout = poll_timeout
        self._allowed_updates = list(allowed_updates)
        self._retry_interval = retry_interval
        self._loops = loops if loops is not None else LoopRegistry()
        self._offset: int | None = None
        self.leading = False

    async def run(self) -> None:
        """Step until cancelled; a step that fails (the database down, anything else) is
        logged and made again, backing off."""
        pace = Pace(
            self._retry_interval,
            # one getUpdates, plus the ping before it and the hand-over after it
            longest=self._poll_timeout + LONGEST_EXTRA,
            first_retry=self._retry_interval,
            max_retry=MAX_RETRY,
        )
        try:
            await supervise("polling", self._step, pace, self._loops)
        finally:
            self.leading = False

    async def _step(self) -> float:
        """Take the leadership if it is free, then (leading) poll once; the seconds to
        wait before the next step."""
        if not self.leading:
            if not await self._leadership.try_acquire():
                return self._retry_interval
            self.leading = True
            self._offset = None  # Telegram's oldest unacknowledged update first
            log.info("polling: this worker polls Telegram for all workers")
        if not await self._leadership.held():
            self.leading = False
            log.warning("polling: leadership lost; following again")
            return self._retry_interval
        return await self._poll_once()

    async def _poll_once(self) -> float:
        try:
            updates = await self._bot.get_updates(
                offset=self._offset,
                timeout=self._poll_timeout,
                allowed_updates=self._allowed_updates,
            )
        except Conflict as exc:  # an old leader's last getUpdates is still open
            log.warning("polling: another getUpdates is running (%s); retrying", exc)
            return PAUSE_AFTER_ERROR
        except TelegramError as exc:  # network trouble, Telegram's own errors
            log.warning("polling: getUpdates failed (%s); retrying", exc)
            return PAUSE_AFTER_ERROR
        taken = await asyncio.gather(*(self._hand_over(update) for update in updates))
        for update, ok in zip(updates, taken, strict=True):
            if not ok:
                return PAUSE_AFTER_ERROR  # not acknowledged: this one and the rest come again
            self._offset = update.update_id + 1
        return 0.0

    async def _hand_over(self, update: Update) -> bool:
        """Give the update to the sink; False if it must be fetched again later."""
        try:
            await self._sink(update.to_dict(), update)
        except StoreUnavailable as exc:
            log.warning("polling: update %d not queued yet: %s", update.update_id, exc)
            return False
        except Exception:  # an update the sink cannot take would otherwise stop polling
            log.exception("polling: update %d could not be queued; skipped", update.update_id)
        return True
