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
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from telegram import Bot, Update
from telegram.error import Conflict, TelegramError

from core.errors import StoreUnavailable

log = logging.getLogger(__name__)

POLL_TIMEOUT = 30
RETRY_INTERVAL = 2.0
PAUSE_AFTER_ERROR = 1.0

UpdateSink = Callable[[dict[str, Any], Update], Awaitable[bool]]
"""Commits an update (its JSON object and its parsed form) for handling; False for a
redelivery."""


class Leadership(Protocol):
    """One leader among processes (`storage.pg_locks.PostgresLeadership`)."""

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
    ) -> None:
        self._bot = bot
        self._sink = sink
        self._leadership = leadership
        self._poll_timeout = poll_timeout
        self._allowed_updates = list(allowed_updates)
        self._retry_interval = retry_interval
        self.leading = False

    async def run(self) -> None:
        try:
            while True:
                if await self._try_lead():
                    self.leading = True
                    log.info("polling: this worker polls Telegram for all workers")
                    await self._poll()
                    self.leading = False
                    log.warning("polling: leadership lost; following again")
                await asyncio.sleep(self._retry_interval)
        finally:
            self.leading = False

    async def _try_lead(self) -> bool:
        try:
            return await self._leadership.try_acquire()
        except StoreUnavailable as exc:
            log.warning("polling: cannot ask for leadership now: %s", exc)
            return False

    async def _poll(self) -> None:
        offset: int | None = None  # Telegram's oldest unacknowledged update first
        while await self._leadership.held():
            try:
                updates = await self._bot.get_updates(
                    offset=offset,
                    timeout=self._poll_timeout,
                    allowed_updates=self._allowed_updates,
                )
            except Conflict as exc:  # an old leader's last getUpdates is still open
                log.warning("polling: another getUpdates is running (%s); retrying", exc)
                await asyncio.sleep(PAUSE_AFTER_ERROR)
                continue
            except TelegramError as exc:  # network trouble, Telegram's own errors
                log.warning("polling: getUpdates failed (%s); retrying", exc)
                await asyncio.sleep(PAUSE_AFTER_ERROR)
                continue
            taken = await asyncio.gather(*(self._hand_over(update) for update in updates))
            for update, ok in zip(updates, taken, strict=True):
                if not ok:
                    await asyncio.sleep(PAUSE_AFTER_ERROR)
                    break  # not acknowledged: this one and the rest are fetched again
                offset = update.update_id + 1

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
