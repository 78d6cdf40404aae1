"""How often a chat is told the database is unavailable: at most once a minute.

Invariant: during an outage every input fails the same way (the turn's store, or the
shared limit checked before it), so telling each one would let an outage spend a group's
20 messages a minute and flood its members. The first "temporarily unavailable" in a chat
is said, later ones within a minute are dropped (logged at debug); a button press is told
in its own popup instead and costs the chat nothing. Kept in this process's memory: the
database cannot be asked during its own outage, and each worker telling a chat once a
minute stays bounded. Memory holds only chats told in the last minute.

What the notice says depends on whether the update is kept: the shared inbox keeps an
update whose handling met an unavailable store and handles it again later (`keep_update`,
set by `bot.updates.inbox` around each queued handling), so its chat is told the message will be
answered; without the inbox nothing was kept, and the chat is asked to send it again. A
handler that swallows a `StoreUnavailable` calls `store_failed`, which is how the inbox
learns of it: no handler needs to know whether an inbox runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

from core.primitives.expiring import ExpiringDict

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


@dataclass(slots=True)
class KeptUpdate:
    """The update being handled is kept until handled; `failed` once the store failed."""

    failed: bool = False


_kept: ContextVar[KeptUpdate | None] = ContextVar("kept_update", default=None)


def keep_update() -> KeptUpdate:
    """Mark the update handled in this context (and the tasks it starts) as kept: a
    `store_failed` during its handling leaves it for another try."""
    kept = KeptUpdate()
    _kept.set(kept)
    return kept


def store_failed() -> str:
    """The store failed while the update in this context was handled: note it (for the
    inbox) and return the notice's i18n key: "store_kept" when the update is kept,
    else "store_unavailable" (send it again)."""
    kept = _kept.get()
    if kept is None:
        return "store_unavailable"
    kept.failed = True
    return "store_kept"
