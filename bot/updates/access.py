"""Who may use the bot, and how often: allow-lists and a per-user rate limit.

The limit is a port (`UserRateLimits`) with one meaning: at most N events per user in any
60-second window (a sliding window log). `RateLimiter` keeps it in memory (only for users
active in the last minute), right for one process; it protects the model bill and a
group's share of Telegram's messages from floods (messages and commands count;
`bot.commands.refusals` says refusals through its "warned" mark), so losing it on restart is
harmless. Several worker processes share one limit instead
(`storage.postgres.cluster.rate_limits.PostgresRateLimits`, the same algorithm), so a
user reaching two workers is not allowed twice as much; `tests/bot/test_rate_limits_contract.py`
runs the same tests over both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from core.primitives.expiring import ExpiringDict
from core.primitives.rate_window import WINDOW_SECONDS, SlidingWindows


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

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._windows: SlidingWindows[int] = SlidingWindows(per_minute, clock=clock)
        self._warned: ExpiringDict[int, float] = ExpiringDict(WINDOW_SECONDS, clock=clock)

    async def should_warn(self, user_id: int) -> bool:
        """Whether to tell a limited user so: once per window, not on every message."""
        if user_id in self._warned:
            return False
        self._warned[user_id] = self._clock()
        return True

    async def check(self, user_id: int) -> float:
        """Record an event; return 0 when allowed, else the seconds to wait."""
        return self._windows.check(user_id)

    def tracked(self) -> int:
        """Users whose state is held (for tests and monitoring)."""
        return len(self._windows)
