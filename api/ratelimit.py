"""Requests per client per minute, as a token bucket per client.

Invariants: a client may send `per_minute` requests at once, then one more every
`60 / per_minute` seconds; memory holds only clients seen in the last minute (a
bucket idle that long is full again, so forgetting it changes nothing), and each
check costs O(1) amortised: the buckets live in an `ExpiringDict` with that lifetime.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from core.expiring import ExpiringDict

WINDOW_SECONDS = 60.0


class RateLimiter:
    """`check(client)` → 0 if the request may go ahead, else seconds until it may."""

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._capacity = float(per_minute)
        self._refill = per_minute / WINDOW_SECONDS  # tokens per second
        self._clock = clock
        # (tokens, at) per client, forgotten a window after its last request.
        self._buckets: ExpiringDict[str, tuple[float, float]] = ExpiringDict(
            WINDOW_SECONDS, clock=clock
        )

    def check(self, client: str) -> float:
        if self._capacity <= 0:
            return 0.0
        now = self._clock()
        tokens, at = self._buckets.pop(client) or (self._capacity, now)
        tokens = min(self._capacity, tokens + (now - at) * self._refill)
        if tokens >= 1.0:
            self._buckets[client] = (tokens - 1.0, now)
            return 0.0
        self._buckets[client] = (tokens, now)
        return (1.0 - tokens) / self._refill

    def retry_after(self, client: str) -> int:
        """Whole seconds for a `Retry-After` header (at least 1) if refused now, else 0."""
        wait = self.check(client)
        return max(1, math.ceil(wait)) if wait > 0 else 0

    def __len__(self) -> int:
        return len(self._buckets)
