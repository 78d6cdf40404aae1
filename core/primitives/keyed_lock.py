"""Per-key mutual exclusion: calls for one key run one after another, keys in parallel.

An entry exists only while some coroutine holds or waits for its key, so the map
stays as small as the number of chats currently busy.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class KeyedLock:
    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock_now, users_now = self._locks[key]
            if users_now <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock_now, users_now - 1)

    def __len__(self) -> int:
        return len(self._locks)
