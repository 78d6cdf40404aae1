"""Flood control for Bot API calls, scoped to the chat that was limited.

PTB's `AIORateLimiter` answers a RetryAfter by pausing *every* request of the bot,
so one busy group would stall all private chats, and its default overall cap of
30 requests/s alone makes 500 simultaneous replies take 17 s. Here a RetryAfter
pauses only the chat it came from, groups keep Telegram's 20 messages a minute,
and the overall cap is optional (`TELEGRAM_MAX_RATE`).

Per-chat state is bounded (`ExpiringDict`): a pause is forgotten once it is
over, a group's limiter once the group was idle long enough for it to be full
again (a new one is then identical), so chats that never return cost nothing.

The pauses are a port (`FloodWaits`): `MemoryFloodWaits` pauses this process only;
several workers share them instead
(`storage.postgres.cluster.flood_waits.PostgresFloodWaits`), so a chat Telegram
limited is left alone by every worker, not only by the one that was told.
The per-group and overall rates stay per process.
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, Protocol

from aiolimiter import AsyncLimiter
from telegram.error import RetryAfter
from telegram.ext import BaseRateLimiter

from core.primitives.expiring import ExpiringDict

log = logging.getLogger(__name__)

JSON = bool | dict[str, Any] | list[dict[str, Any]]
UNLIMITED_ENDPOINTS = frozenset({"sendChatAction", "sendMessageDraft", "answerCallbackQuery"})
GROUP_WINDOW = 60.0
"""Telegram's group limit is per minute; an idle limiter is full again after one window."""


class FloodWaits(Protocol):
    """Per chat, how long to send nothing (Telegram's RetryAfter)."""

    async def pause(self, chat_id: int, seconds: float) -> None:
        """Send nothing to `chat_id` for `seconds` from now, or longer if a pause already
        running ends later."""
        ...

    async def remaining(self, chat_id: int) -> float:
        """Seconds before `chat_id` may receive messages again (0: now)."""
        ...

    def tracked(self) -> int:
        """Chats with a pause held in this process (for tests and monitoring)."""
        ...


class MemoryFloodWaits:
    """`FloodWaits` of this process: each pause is forgotten once over; a pause ending
    before the one running does not shorten it (the later end is kept)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._until: ExpiringDict[int, float] = ExpiringDict(0, clock=clock)
        self._clock = clock

    async def pause(self, chat_id: int, seconds: float) -> None:
        now = self._clock()
        until = max(now + seconds, self._until.get(chat_id) or now)
        self._until.set(chat_id, until, ttl=until - now)

    async def remaining(self, chat_id: int) -> float:
        until = self._until.get(chat_id)  # None once the pause is over
        return 0.0 if until is None else max(until - self._clock(), 0.0)

    def tracked(self) -> int:
        return len(self._until)


class ChatFloodControl(BaseRateLimiter[dict[str, Any]]):
    """`rate_limit_args` may be `{"max_retries": n}` to override retries for one call."""

    def __init__(
        self,
        *,
        overall_per_second: float = 0,
        group_per_minute: int = 20,
        max_retries: int = 5,
        waits: FloodWaits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._overall = AsyncLimiter(overall_per_second, 1) if overall_per_second > 0 else None
        self._group_per_minute = group_per_minute
        # Kept two windows after last use, so a limiter with callers still queued stays.
        self._groups: ExpiringDict[int, AsyncLimiter] = ExpiringDict(2 * GROUP_WINDOW, clock=clock)
        self._waits = MemoryFloodWaits(clock) if waits is None else waits
        self._max_retries = max_retries

    def tracked_chats(self) -> int:
        """Chats with a pause or a group limiter held (for tests and monitoring)."""
        return len(self._groups) + self._waits.tracked()

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to release."""

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, JSON]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: dict[str, Any] | None,
    ) -> JSON:
        chat_id = _chat_id(data)
        retries = self._max_retries
        if rate_limit_args and "max_retries" in rate_limit_args:
            retries = int(rate_limit_args["max_retries"])
        for attempt in range(retries + 1):
            await self._wait_if_paused(chat_id)
            await self._acquire(chat_id, endpoint)
            try:
                return await callback(*args, **kwargs)
            except RetryAfter as exc:
                wait = retry_seconds(exc) + 0.1
                if chat_id is not None:
                    await self._waits.pause(chat_id, wait)
                if attempt == retries:
                    raise
                log.info("flood control in chat %s: waiting %.1f s", chat_id, wait)
                if chat_id is None:
                    await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    async def _wait_if_paused(self, chat_id: int | None) -> None:
        if chat_id is None:
            return
        wait = await self._waits.remaining(chat_id)
        if wait > 0:
            await asyncio.sleep(wait)

    async def _acquire(self, chat_id: int | None, endpoint: str) -> None:
        if chat_id is None or endpoint in UNLIMITED_ENDPOINTS:
            return
        if chat_id < 0 and self._group_per_minute > 0:
            limiter = self._groups.get(chat_id) or AsyncLimiter(
                self._group_per_minute, GROUP_WINDOW
            )
            self._groups[chat_id] = limiter
            await limiter.acquire()
            self._groups[chat_id] = limiter  # last use: when its queue moved
        if self._overall is not None:
            await self._overall.acquire()


def retry_seconds(exc: RetryAfter) -> float:
    """RetryAfter's delay in seconds, without PTB 22's deprecation warning on `retry_after`."""
    delay = getattr(exc, "_retry_after", None)
    if delay is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            delay = exc.retry_after
    return delay.total_seconds() if isinstance(delay, timedelta) else float(delay)


def _chat_id(data: dict[str, Any]) -> int | None:
    value = data.get("chat_id")
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
