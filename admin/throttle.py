"""Failed sign-ins per client address: at most N in a window, then refused until the
oldest leaves it.

Invariants: memory is bounded — at most `MAX_ADDRESSES` addresses are tracked (the one
least recently failing is forgotten first) and each holds at most N times; a successful
sign-in is never counted; the clock is injected, so tests need no waiting.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

MAX_ADDRESSES = 10_000


class SignInThrottle:
    def __init__(
        self,
        limit: int,
        window: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_addresses: int = MAX_ADDRESSES,
    ) -> None:
        self._limit = limit
        self._window = window
        self._clock = clock
        self._max = max_addresses
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, address: str) -> float:
        """0 when `address` may try to sign in now, else the seconds until it may."""
        failures = self._recent(address)
        if failures is None or len(failures) < self._limit:
            return 0.0
        return max(0.0, failures[0] + self._window - self._clock())

    def failed(self, address: str) -> None:
        """Count a failed sign-in from `address`."""
        failures = self._recent(address) or deque(maxlen=self._limit)
        failures.append(self._clock())
        self._failures[address] = failures
        self._failures.move_to_end(address)
        while len(self._failures) > self._max:
            self._failures.popitem(last=False)

    def __len__(self) -> int:
        return len(self._failures)

    def _recent(self, address: str) -> deque[float] | None:
        failures = self._failures.get(address)
        if failures is None:
            return None
        since = self._clock() - self._window
        while failures and failures[0] <= since:
            failures.popleft()
        if not failures:
            del self._failures[address]
            return None
        return failures
