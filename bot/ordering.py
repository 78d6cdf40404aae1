"""Update processing: one chat strictly in order, different chats concurrently.

PTB's `concurrent_updates(True)` gives no ordering at all, and sequential
processing lets one slow model call hold up every chat. This processor takes a
per-conversation lock around each update: a second message sent while the first
is being answered waits its turn (it is never rejected or raced), while other
chats proceed. Tasks are created in arrival order and asyncio locks are FIFO, so
arrival order is kept.

A few commands must answer while a reply is being written (`/status` reads,
`/reset` stops the running turn): they skip the lock. Everything else, including
"/answer", its button and the commands that change settings, keeps its place.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Any

from telegram import MessageEntity, Update
from telegram.ext import BaseUpdateProcessor

from bot.chat import conversation_key
from core.keyed_lock import KeyedLock


def command_of(update: Update) -> str | None:
    """The bot command a new message starts with ("reset" for "/reset@bot now"), or None."""
    message = update.message
    if message is None or not message.text or not message.entities:
        return None
    first = message.entities[0]
    if first.type != MessageEntity.BOT_COMMAND or first.offset != 0:
        return None
    return message.text[1 : first.length].split("@", 1)[0].lower()


class PerChatUpdateProcessor(BaseUpdateProcessor):
    def __init__(
        self, max_concurrent_updates: int = 4096, *, unordered_commands: Iterable[str] = ()
    ) -> None:
        """`unordered_commands` run at once, without waiting for the conversation's turn."""
        super().__init__(max_concurrent_updates)
        self._locks = KeyedLock()
        self._unordered = frozenset(unordered_commands)

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        key = conversation_key(update) if isinstance(update, Update) else None
        if key is None or (isinstance(update, Update) and command_of(update) in self._unordered):
            await coroutine
            return
        async with self._locks.hold(key):
            await coroutine

    async def initialize(self) -> None:
        """Nothing to allocate: locks are created on demand."""

    async def shutdown(self) -> None:
        """Nothing to free."""
