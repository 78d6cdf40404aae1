"""Who may use the bot, and how often: allow-lists and a per-user rate limit.

The limit is a port (`UserRateLimits`) with one meaning: at most N events per user in any
60-second window (a sliding window log). `RateLimiter` keeps it in memory (only for users
active in the last minute), right for one process; it protects the model bill and a
group's share of Telegram's messages from floods (messages and commands count;
`bot.refusals` says refusals through its "warned" mark), so losing it on restart is
harmless. Several worker processes share one limit instead
(`storage.postgres.coordination.rate_limits.PostgresRateLimits`, the same algorithm), so a
user reaching two workers is not allowed twice as much; `tests/test_rate_limits_contract.py`
runs the same tests over both.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from core.expiring import ExpiringDict


class UserRateLimits(Protocol):
    """How often each user may write: at most N counted events in any 60 seconds."""

    async def check(self, user_id: int) -> float:
        """Count a message: 0 when allowed, else the seconds until the oldest counted one
        leaves the window (nothing counted)."""
        ...

    async def should_warn(self, user_id: int) -> bool:
        """Whether to tell the user a refusal (too many, or any refusal in a group): True
        at most once a minute per user, whatever is refused."""
        ...


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
    """`UserRateLimits` in this process's memory: at most `per_minute` events per user in
    any 60-second window (0: unlimited).

    Memory and time stay bounded however many users write: a user's state
    expires a window after their last counted event (`ExpiringDict`), so each
    check costs O(1) amortised and only users active in the last minute are kept.
    """

    WINDOW = 60.0

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = per_minute
        self._clock = clock
        self._events: ExpiringDict[int, deque[float]] = ExpiringDict(self.WINDOW, clock=clock)
        self._warned: ExpiringDict[int, float] = ExpiringDict(self.WINDOW, clock=clock)

    async def should_warn(self, user_id: int) -> bool:
        """Whether to tell a limited user so: once per window, not on every message."""
        if user_id in self._warned:
            return False
        self._warned[user_id] = self._clock()
        return True

    async def check(self, user_id: int) -> float:
        """Record an event; return 0 when allowed, else the seconds to wait."""
        if self._limit <= 0:
            return 0.0
        now = self._clock()
        events = self._events.get(user_id) or deque()
        while events and now - events[0] >= self.WINDOW:
            events.popleft()
        if len(events) >= self._limit:
            return self.WINDOW - (now - events[0])
        events.append(now)
        self._events[user_id] = events
        return 0.0

    def tracked(self) -> int:
        """Users whose state is held (for tests and monitoring)."""
        return len(self._events)
