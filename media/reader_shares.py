"""Each owner's share of the reader pool: who asked for a read (a Telegram user, an API
client, the console) holds at most `max(1, readers - 1)` readers at once.

Invariant: an owner's reads past its share wait for that owner's own earlier reads to end
(however they end: read, refused, cancelled), never for other owners'; so with two or
more readers one owner never takes them all. A read with no owner is not bound here.
Nothing is kept for an owner with no read running or waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class _Share:
    def __init__(self, size: int) -> None:
        self.slots = asyncio.Semaphore(size)
        self.users = 0  # reads running or waiting


class ReaderShares:
    """Per-owner bounds on a pool of `readers` readers."""

    def __init__(self, readers: int) -> None:
        self.share = max(1, readers - 1)
        self._owners: dict[str, _Share] = {}

    def owners(self) -> int:
        """How many owners have a read running or waiting."""
        return len(self._owners)

    @contextlib.asynccontextmanager
    async def turn(self, owner: str | None) -> AsyncIterator[None]:
        """Wait for a place in `owner`'s share; held until the block ends."""
        if owner is None:
            yield
            return
        share = self._owners.get(owner)
        if share is None:
            share = self._owners[owner] = _Share(self.share)
        share.users += 1
        try:
            async with share.slots:
                yield
        finally:
            share.users -= 1
            if share.users == 0:
                del self._owners[owner]
