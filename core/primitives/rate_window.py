"""At most N events per key in any 60-second window (a sliding window log), in memory.

This is what every "per minute" setting of the product means: `USER_RATE_LIMIT_PER_MINUTE`
and `BUTTON_PRESSES_PER_MINUTE` (the bot, and on PostgreSQL the same algorithm across
workers) and `API_RATE_LIMIT_PER_MINUTE` (the HTTP API).

Invariants: an event refused is not counted; memory holds only keys with an event in the
last window (a key expires a window after its last counted event, through `ExpiringDict`),
and each check costs O(1) amortised (each event enters and leaves its key's log once).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from core.primitives.expiring import ExpiringDict

WINDOW_SECONDS = 60.0

K = TypeVar("K", bound=Hashable)


class SlidingWindows(Generic[K]):
    """`check(key)` → 0 when the event may go ahead (it is counted), else the seconds until
    the oldest counted event leaves the window (nothing counted). A limit of 0 or less
    refuses nothing."""

    def __init__(self, limit: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = limit
        self._clock = clock
        self._events: ExpiringDict[K, deque[float]] = ExpiringDict(WINDOW_SECONDS, clock=clock)

    def check(self, key: K) -> float:
        if self._limit <= 0:
            return 0.0
        now = self._clock()
        events = self._events.get(key) or deque()
        while events and now - events[0] >= WINDOW_SECONDS:
            events.popleft()
        if len(events) >= self._limit:
            return WINDOW_SECONDS - (now - events[0])
        events.append(now)
        self._events[key] = events
        return 0.0

    def __len__(self) -> int:
        """Keys whose events are held."""
        return len(self._events)
