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

Ordered updates pass the process's intake gate (`core.primitives.intake_gate`) once their
chat's turn has come: a few at a time until their model call starts, so a burst of new
chats reaches the model at once instead of in lockstep.

No update holds its chat forever: one whose handling runs past `deadline` is cancelled
(as a /reset or a failure would stop it: what it had stored stays, nothing half-written,
since the store's writes are single statements) and `on_deadline` tells its chat; the
chat's next update goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from telegram import MessageEntity, Update
from telegram.ext import BaseUpdateProcessor

from bot.transport.chat import conversation_key
from core.primitives.intake_gate import IntakeGate
from core.primitives.keyed_lock import KeyedLock

log = logging.getLogger(__name__)


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
        self,
        max_concurrent_updates: int = 4096,
        *,
        unordered_commands: Iterable[str] = (),
        deadline: float | None = None,
        on_deadline: Callable[[Update], Awaitable[object]] | None = None,
        intake: IntakeGate | None = None,
    ) -> None:
        """`unordered_commands` run at once, without waiting for the conversation's turn;
        an update still running after `deadline` seconds is stopped (None: never); `intake`
        is the process's gate (shared by every bot it serves; None: no gate)."""
        super().__init__(max_concurrent_updates)
        self._intake = intake or IntakeGate(0)
        self._locks = KeyedLock()
        self._unordered = frozenset(unordered_commands)
        self._deadline = deadline
        self._on_deadline = on_deadline

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        key = conversation_key(update) if isinstance(update, Update) else None
        if key is None or (isinstance(update, Update) and command_of(update) in self._unordered):
            await coroutine
            return
        async with self._locks.hold(key), self._intake.enter():
            await self._within_deadline(update, coroutine)

    async def _within_deadline(self, update: object, coroutine: Awaitable[Any]) -> None:
        if self._deadline is None or not isinstance(update, Update):
            await coroutine
            return
        try:
            async with asyncio.timeout(self._deadline) as scope:
                await coroutine
        except TimeoutError:
            if not scope.expired():  # a timeout of the handling's own, not the deadline
                raise
            log.warning(
                "update %d still running after %g s: stopped", update.update_id, self._deadline
            )
            if self._on_deadline is not None:
                await self._on_deadline(update)

    async def initialize(self) -> None:
        """Nothing to allocate: locks are created on demand."""

    async def shutdown(self) -> None:
        """Nothing to free."""
