"""How many progress requests (typing actions, drafts) the whole bot sends per second.

Progress is cosmetic; answers are not. When 500 chats write at once, a typing action and
a draft for each would cost as many requests as the answers themselves, on the same event
loop, while the answers wait. A loop flooded with many short callbacks runs every timer
on time, so lateness alone (`bot.transport.progress.SHED_AFTER`) does not see that; a
budget does. `RATE` follows Telegram's own guidance for a bot's messages across chats
(about 30 a second): a chat whose progress request finds the budget spent skips it (a
draft) or tries again later (a typing action), and its answer is sent as always.

Invariant: at most `BURST` + `RATE` × t requests pass in any t seconds, for all chats of
the loop together; a bucket refills continuously, so normal traffic (a few dozen
chats streaming at once) never finds it empty.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable

RATE = 30.0
"""Progress requests per second, for the whole bot."""
BURST = 30.0
"""Requests the budget holds when full (what a quiet bot may send at once)."""


class ProgressBudget:
    """A token bucket: `take()` spends one request if there is one."""

    def __init__(
        self,
        *,
        rate: float = RATE,
        burst: float = BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rate = rate
        self._burst = burst
        self._clock = clock
        self._tokens = burst
        self._at = clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


_budgets: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ProgressBudget] = (
    weakref.WeakKeyDictionary()
)


def progress_budget() -> ProgressBudget:
    """The running loop's budget (one per loop: one bot process, made on first use)."""
    loop = asyncio.get_running_loop()
    budget = _budgets.get(loop)
    if budget is None:
        budget = _budgets[loop] = ProgressBudget()
    return budget
