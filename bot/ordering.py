"""Update processing: one chat strictly in order, different chats concurrently.

PTB's `concurrent_updates(True)` gives no ordering at all, and sequential
processing lets one slow model call hold up every chat. This processor takes a
per-conversation lock around each update: a second message sent while the first
is being answered waits its turn (it is never rejected or raced), while other
chats proceed. Tasks are created in arrival order and asyncio locks are FIFO, so
arrival order is kept.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from telegram import Update
from telegram.ext import BaseUpdateProcessor

from bot.chat import conversation_key
from core.keyed_lock import KeyedLock


class PerChatUpdateProcessor(BaseUpdateProcessor):
    def __init__(self, max_concurrent_updates: int = 4096) -> None:
        super().__init__(max_concurrent_updates)
        self._locks = KeyedLock()

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        key = conversation_key(update) if isinstance(update, Update) else None
        if key is None:
            await coroutine
            return
        async with self._locks.hold(key):
            await coroutine

    async def initialize(self) -> None:
        """Nothing to allocate: locks are created on demand."""

    async def shutdown(self) -> None:
        """Nothing to free."""
