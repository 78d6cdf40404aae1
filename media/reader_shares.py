"""Who gets the reader pool's next reader: `readers` at once in all, and each owner (who
asked for a read: a person, an API client, the terminal) at most its share,
`max(1, readers - 1)`, while anyone else waits.

Invariants:
- at most `readers` reads run at once; reads wait in arrival order, and a free reader goes
  to the first waiting read whose owner is under its share (a read with no owner always
  is), so with two or more readers one owner never keeps another waiting for more than
  the end of one of its reads;
- a lone owner (no one else waiting) also takes the idle readers past its share: a reader
  never stays idle while a read waits for it;
- a read ends however it ends (read, refused, cancelled, cancelled just as its reader was
  given to it), and its reader goes to the next; nothing is kept for an owner with no
  read running or waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Waiting:
    owner: str | None
    given: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class ReaderShares:
    """The readers of a pool of `readers`, given out per owner."""

    def __init__(self, readers: int) -> None:
        self.readers = readers
        self.share = max(1, readers - 1)
        self._running: dict[str | None, int] = {}
        self._waiting: deque[_Waiting] = deque()

    def owners(self) -> int:
        """How many owners have a read running or waiting."""
        owners = {w.owner for w in self._waiting} | set(self._running)
        return len(owners - {None})

    def running(self) -> int:
        return sum(self._running.values())

    @contextlib.asynccontextmanager
    async def reader(self, owner: str | None) -> AsyncIterator[None]:
        """Wait for a reader for `owner`; it is held until the block ends."""
        waiting = _Waiting(owner)
        self._waiting.append(waiting)
        self._give()
        try:
            await waiting.given
        except BaseException:
            if waiting.given.done() and not waiting.given.cancelled():
                self._end(owner)  # given a reader as it was cancelled: the next gets it
            else:
                self._waiting.remove(waiting)
                self._give()  # an owner waiting behind this one may be lone now
            raise
        try:
            yield
        finally:
            self._end(owner)

    def _end(self, owner: str | None) -> None:
        left = self._running[owner] - 1
        if left:
            self._running[owner] = left
        else:
            del self._running[owner]
        self._give()

    def _give(self) -> None:
        """Hand free readers to the first waiting reads that may have them."""
        for waiting in list(self._waiting):
            if self.running() >= self.readers:
                return
            if waiting.given.cancelled() or not self._may_start(waiting.owner):
                continue
            self._waiting.remove(waiting)
            self._running[waiting.owner] = self._running.get(waiting.owner, 0) + 1
            waiting.given.set_result(None)

    def _may_start(self, owner: str | None) -> bool:
        if owner is None or self._running.get(owner, 0) < self.share:
            return True
        return all(w.owner == owner for w in self._waiting)  # a lone owner
