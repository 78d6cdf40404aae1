"""Sign-in attempts per client address: at most N in a window, each counted before its
token is read, then refused until the oldest leaves the window.

Invariants:
- an attempt is reserved (checked and counted in one step, no await between them) before
  the request's body is awaited, so sign-ins from one address that arrive together hold
  at most N token comparisons per window between them, however slowly their bodies come;
- a reservation is given back (`release`) when no token was compared as wrong (a sign-in
  that succeeded, a forged form refused unread, a body that never came): only failures
  stay counted, so the operator signing in often is never refused;
- at most `max_audited` failed sign-ins of a window are written to the audit log, all
  addresses together (`take_audit_slot`);
- memory is bounded: at most `MAX_ADDRESSES` addresses are tracked (the one least
  recently counted is forgotten first) and each holds at most N times; the clock is
  injected, so tests need no waiting.

`PostgresSignIns` (`storage.postgres.cluster.sign_ins`) keeps the same count in a
table every worker shares.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

from core.domain.sign_in_limits import MAX_AUDITED, Reserved

MAX_ADDRESSES = 10_000


class SignInThrottle:
    """The attempts of one process, in memory (`SignInLimits`)."""

    def __init__(
        self,
        limit: int,
        window: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_addresses: int = MAX_ADDRESSES,
        max_audited: int = MAX_AUDITED,
    ) -> None:
        self._limit = limit
        self._window = window
        self._clock = clock
        self._max = max_addresses
        self._attempts: OrderedDict[str, deque[float]] = OrderedDict()
        self._max_audited = max_audited
        self._audited: deque[float] = deque()

    async def reserve(self, address: str) -> Reserved:
        now = self._clock()
        attempts = self._recent(address, now)
        if attempts is not None and len(attempts) >= self._limit:
            return Reserved(None, max(0.0, attempts[0] + self._window - now))
        attempts = attempts or deque(maxlen=self._limit)
        attempts.append(now)
        self._attempts[address] = attempts
        self._attempts.move_to_end(address)
        while len(self._attempts) > self._max:
            self._attempts.popitem(last=False)
        return Reserved(now)

    async def release(self, address: str, at: float) -> None:
        attempts = self._attempts.get(address)
        if attempts is None:
            return  # forgotten meanwhile: nothing to give back
        try:
            attempts.remove(at)
        except ValueError:
            return
        if not attempts:
            del self._attempts[address]

    async def take_audit_slot(self) -> int | None:
        now = self._clock()
        audited = self._audited
        while audited and audited[0] <= now - self._window:
            audited.popleft()
        if len(audited) >= self._max_audited:
            return None
        audited.append(now)
        return self._max_audited - len(audited)

    def __len__(self) -> int:
        return len(self._attempts)

    def _recent(self, address: str, now: float) -> deque[float] | None:
        attempts = self._attempts.get(address)
        if attempts is None:
            return None
        while attempts and attempts[0] <= now - self._window:
            attempts.popleft()
        if not attempts:
            del self._attempts[address]
            return None
        return attempts
