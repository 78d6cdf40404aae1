"""Requests per client per minute: at most `per_minute` in any 60 seconds (the sliding
window every "per minute" setting of the product means, `core.primitives.rate_window`).

Invariants: a refused request is not counted; memory holds only clients with a request in
the last minute, and each check costs O(1) amortised.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from core.primitives.rate_window import SlidingWindows


class RateLimiter:
    """`check(client)` → 0 if the request may go ahead, else seconds until it may."""

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._windows: SlidingWindows[str] = SlidingWindows(per_minute, clock=clock)

    def check(self, client: str) -> float:
        return self._windows.check(client)

    def retry_after(self, client: str) -> int:
        """Whole seconds for a `Retry-After` header (at least 1) if refused now, else 0."""
        wait = self.check(client)
        return max(1, math.ceil(wait)) if wait > 0 else 0

    def __len__(self) -> int:
        return len(self._windows)
