"""The updates a worker is handling, one per chat: each within a deadline, and each
stoppable by its update id from outside (a /reset, received here or by another worker).

Invariants:
- `run` always returns, saying how the handling ended (`Ended`); a handling it cancels
  (past the deadline, stopped, or `run` itself cancelled) is given `grace` seconds to
  unwind and then left behind, so no handling holds its chat longer than the deadline
  and the grace.
- A stop cancels only the handling it names (`stop`: that update; `stop_before`: the
  chat's update older than a given one), never one of a later update; a stop for an
  update not being handled here is remembered (a bounded number of them), so if this
  worker takes that update up later it does not start it.
- `stop_earlier` stops something only while a command offered it is processed (a /reset
  that came through the shared inbox, after its permission check passed): that command's
  chat's update older than it, and nothing else.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass

GRACE = 10.0
"""Seconds a cancelled handling is given to unwind before the chat goes on without it."""
STOPS_KEPT = 1000

StopEarlier = Callable[[], Awaitable[bool]]
_stop_earlier: ContextVar[StopEarlier | None] = ContextVar("stop_earlier", default=None)


def offer_stop_earlier(stop: StopEarlier) -> None:
    """Let the command processed in this context (and the tasks it starts) call `stop`."""
    _stop_earlier.set(stop)


async def stop_earlier() -> bool:
    """Stop the chat's update older than the command being processed, on whichever worker
    handles it, if the command was offered that; True when one was stopped."""
    stop = _stop_earlier.get()
    return False if stop is None else await stop()


class Ended(enum.Enum):
    DONE = "done"
    FAILED = "failed"  # raised (`Outcome.error`), or was cancelled from inside
    PAST_DEADLINE = "past deadline"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Outcome:
    ended: Ended
    error: BaseException | None = None


class Handlings:
    def __init__(self, deadline: float, *, grace: float = GRACE) -> None:
        self._deadline = deadline
        self._grace = grace
        self._current: dict[str, tuple[int, asyncio.Future[object]]] = {}  # chat → its update
        self._stopped: set[int] = set()  # handlings cancelled by a stop, until `run` says so
        self._asked: dict[int, None] = {}  # stops for updates not handled here (yet)

    async def run(
        self, chat: str | None, update_id: int, work: Callable[[], Awaitable[object]]
    ) -> Outcome:
        """Run `work()` as the chat's handling of `update_id` (`chat` None: not a chat's
        queued update, which nothing stops) within the deadline."""
        if update_id in self._asked:
            del self._asked[update_id]
            return Outcome(Ended.STOPPED)
        task = asyncio.ensure_future(work())
        if chat is not None:
            self._current[chat] = (update_id, task)
        try:
            done, _ = await asyncio.wait({task}, timeout=self._deadline)
        finally:
            if chat is not None and self._current.get(chat) == (update_id, task):
                del self._current[chat]
            if not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=self._grace)
        if update_id in self._stopped:
            self._stopped.discard(update_id)
            return Outcome(Ended.STOPPED)
        if not done:
            return Outcome(Ended.PAST_DEADLINE)
        if task.cancelled():
            return Outcome(Ended.FAILED)
        error = task.exception()
        return Outcome(Ended.DONE if error is None else Ended.FAILED, error)

    def stop(self, chat: str, update_id: int) -> None:
        """Stop the handling of `update_id` in `chat`, now if it runs here, else if it
        ever starts here."""
        current = self._current.get(chat)
        if current is not None and current[0] == update_id:
            self._cancel(*current)
            return
        self._asked[update_id] = None
        if len(self._asked) > STOPS_KEPT:
            del self._asked[next(iter(self._asked))]

    def stop_before(self, chat: str, before: int) -> bool:
        """Stop the chat's handling here if its update is older than update `before`; True
        when it was stopped."""
        current = self._current.get(chat)
        if current is None or current[0] >= before or current[1].done():
            return False
        self._cancel(*current)
        return True

    def _cancel(self, update_id: int, task: asyncio.Future[object]) -> None:
        if not task.done():
            self._stopped.add(update_id)
            task.cancel()
