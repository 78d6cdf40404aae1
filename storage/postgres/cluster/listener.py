"""One LISTEN connection a worker shares among every bot's inbox (`SharedListener`).

Each bot's inbox listens on channels of its own (`storage.postgres.cluster.inbox`); a
connection per bot would cost every worker one more connection for each bot it serves,
so the views of one inbox pool listen on one connection instead.

Invariants: a channel is listened on at most once on the connection, with the callback
last given for it; after the connection broke, the next `listen` connects again and
listens on every channel still wanted (the callers' periodic looks cover the gap); a
LISTEN that fails leaves no connection open; `forget` stops a channel's callback at once,
whether or not its UNLISTEN gets through.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection, Mapping
from typing import Any

import asyncpg

from storage.postgres.faults import is_unavailable, unavailable
from storage.postgres.pool import CONNECT_TIMEOUT

Notified = Callable[[Any, int, str, str], None]
"""asyncpg's listener callback: (connection, pid, channel, payload)."""


class SharedListener:
    """The channels listened on over one connection to `url`, opened on first use."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._connection: asyncpg.Connection | None = None
        self._wanted: dict[str, Notified] = {}
        self._added: set[str] = set()  # the channels LISTENed on the current connection
        self._lock = asyncio.Lock()

    async def listen(self, channels: Mapping[str, Notified]) -> None:
        """Listen on `channels`, each calling its callback; nothing for channels already
        listened on while the connection is up. Raises `StoreUnavailable` when the
        database cannot be reached (nothing is left half open)."""
        async with self._lock:
            self._wanted.update(channels)
            connection = self._connection
            if connection is None or connection.is_closed():
                connection = await self._connect()
            try:
                for channel in [c for c in self._wanted if c not in self._added]:
                    await connection.add_listener(channel, self._dispatch)
                    self._added.add(channel)
            except Exception as error:
                self._drop()
                if is_unavailable(error):
                    raise unavailable(error, "inbox listener") from error
                raise

    async def forget(self, channels: Collection[str]) -> None:
        """Stop calling back for `channels` and UNLISTEN them when the connection is up."""
        async with self._lock:
            for channel in channels:
                self._wanted.pop(channel, None)
            connection = self._connection
            for channel in [c for c in channels if c in self._added]:
                self._added.discard(channel)
                if connection is not None and not connection.is_closed():
                    with contextlib.suppress(Exception):  # the callback is gone already
                        await connection.remove_listener(channel, self._dispatch)

    async def close(self) -> None:
        async with self._lock:
            connection, self._connection = self._connection, None
            self._added.clear()
            if connection is not None:
                with contextlib.suppress(Exception):
                    await connection.close(timeout=5)

    @property
    def channels(self) -> frozenset[str]:
        """The channels listened on now."""
        return frozenset(self._added)

    async def _connect(self) -> asyncpg.Connection:
        self._drop()
        try:
            connection = await asyncpg.connect(self._url, timeout=CONNECT_TIMEOUT)
        except Exception as error:
            if is_unavailable(error):
                raise unavailable(error, "inbox listener") from error
            raise
        self._connection = connection
        return connection

    def _drop(self) -> None:
        if self._connection is not None and not self._connection.is_closed():
            self._connection.terminate()
        self._connection = None
        self._added.clear()

    def _dispatch(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        callback = self._wanted.get(channel)
        if callback is not None:
            callback(connection, pid, channel, payload)
