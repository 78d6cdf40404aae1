"""Requests per client per minute, as a token bucket per client.

Invariants: a client may send `per_minute` requests at once, then one more every
`60 / per_minute` seconds; memory holds only clients seen in the last minute (a
bucket idle that long is full again, so forgetting it changes nothing), and each
check costs O(1) amortised: buckets sit in least-recently-used order and the stale
ones are dropped from the front as time passes.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

WINDOW_SECONDS = 60.0


class RateLimiter:
    """`check(client)` → 0 if the request may go ahead, else seconds until it may."""

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._capacity = float(per_minute)
        self._refill = per_minute / WINDOW_SECONDS  # tokens per second
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at

    def check(self, client: str) -> float:
        if self._capacity <= 0:
            return 0.0
        now = self._clock()
        self._forget_idle(now)
        tokens, at = self._buckets.pop(client, (self._capacity, now))
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

    def _forget_idle(self, now: float) -> None:
        buckets = self._buckets
        while buckets:
            _, (_, at) = next(iter(buckets.items()))
            if now - at < WINDOW_SECONDS:
                return
            buckets.popitem(last=False)

    def __len__(self) -> int:
        return len(self._buckets)
