"""How often a chat is told the database is unavailable: at most once a minute.

Invariant: during an outage every input fails the same way (the turn's store, or the
shared limit checked before it), so telling each one would let an outage spend a group's
20 messages a minute and flood its members. The first "temporarily unavailable" in a chat
is said, later ones within a minute are dropped (logged at debug); a button press is told
in its own popup instead and costs the chat nothing. Kept in this process's memory: the
database cannot be asked during its own outage, and each worker telling a chat once a
minute stays bounded. Memory holds only chats told in the last minute.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from core.expiring import ExpiringDict

WINDOW = 60.0


class OutageNotices:
    """Which chat may be told of an outage now."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._told: ExpiringDict[int, bool] = ExpiringDict(WINDOW, clock=clock)

    def may_tell(self, chat_id: int) -> bool:
        """True for the first notice in `chat_id` within a minute (which it then counts)."""
        if chat_id in self._told:
            return False
        self._told[chat_id] = True
        return True
