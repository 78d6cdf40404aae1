"""Who may use the bot, and how often: allow-lists and a per-user rate limit.

The limiter is a sliding window per user kept in memory; it only protects the
model bill from floods, so losing it on restart is harmless.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable


def is_allowed(
    *,
    user_id: int | None,
    chat_id: int,
    allowed_users: frozenset[int],
    allowed_chats: frozenset[int],
) -> bool:
    """Empty lists allow everyone; otherwise the user or the chat must be listed."""
    if not allowed_users and not allowed_chats:
        return True
    return (user_id is not None and user_id in allowed_users) or chat_id in allowed_chats


class RateLimiter:
    """At most `per_minute` events per user in any 60-second window (0: unlimited)."""

    WINDOW = 60.0

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = per_minute
        self._clock = clock
        self._events: dict[int, deque[float]] = {}
        self._warned: dict[int, float] = {}

    def should_warn(self, user_id: int) -> bool:
        """Whether to tell a limited user so: once per window, not on every message."""
        now = self._clock()
        last = self._warned.get(user_id)
        if last is not None and now - last < self.WINDOW:
            return False
        self._warned[user_id] = now
        return True

    def check(self, user_id: int) -> float:
        """Record an event; return 0 when allowed, else the seconds to wait."""
        if self._limit <= 0:
            return 0.0
        now = self._clock()
        events = self._events.setdefault(user_id, deque())
        while events and now - events[0] >= self.WINDOW:
            events.popleft()
        if len(events) >= self._limit:
            return self.WINDOW - (now - events[0])
        events.append(now)
        if len(self._events) > 10_000:  # forget idle users now and then
            self._forget_idle(now)
        return 0.0

    def _forget_idle(self, now: float) -> None:
        idle = [
            user
            for user, events in self._events.items()
            if not events or now - events[-1] >= self.WINDOW
        ]
        for user in idle:
            del self._events[user]
            self._warned.pop(user, None)
