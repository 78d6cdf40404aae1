"""An older round's keyboard is taken away once the conversation's next reply is delivered.

Invariants:
- a conversation (a chat, or a forum topic of one) shows at most one live round keyboard:
  the one under its latest reply when that reply is a round (its options, "Send answers",
  "Give the final answer now"). Once the next reply (a round, or the final answer) is
  delivered, the message that carried the previous round's keyboard is edited to have none;
- which message carries it is kept in the store (`KeyboardMessages`, both stores'
  `round_keyboards` table), so a restarted bot, or another worker, still takes it away;
  each bot's under its scope (`bot`): two bots' chat ids collide;
- taking it away is a nicety after the reply was delivered: a Telegram error (the message
  deleted, too old, already without buttons, flood control) or a store failure is logged,
  never fails the reply. A keyboard left behind that way still answers presses the way an
  old round's buttons do (`bot.commands.round_presses`: "already answered").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from telegram.error import TelegramError

from bot.transport.message_calls import edit_reply_markup
from bot.transport.target import AnyBot, Target
from core.domain.errors import StoreUnavailable
from core.domain.outcomes import Reply
from core.primitives.expiring import ExpiringDict

log = logging.getLogger(__name__)

FORGET_AFTER = 7 * 24 * 3600.0
"""In memory, a conversation silent this long is forgotten (its keyboard stays)."""
MAX_CONVERSATIONS = 100_000


class KeyboardMessages(Protocol):
    """Where the message carrying each conversation's round keyboard is kept (the stores'
    `swap_round_keyboard` and `forget_round_keyboards`)."""

    async def swap_round_keyboard(
        self, chat_id: int, thread_id: int | None, message_id: int | None, *, bot: int = 0
    ) -> int | None:
        """Make `message_id` the bot's conversation's keyboard message (None: none now);
        the one it had before, if any."""
        ...

    async def forget_round_keyboards(self, chat_id: int, *, bot: int = 0) -> int:
        """Forget every conversation of the bot's chat; how many went."""
        ...


class MemoryKeyboardMessages:
    """`KeyboardMessages` in this process's memory (tests, and a bot without a store)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._items: ExpiringDict[tuple[int, int, int], int]
        self._items = ExpiringDict(FORGET_AFTER, max_size=MAX_CONVERSATIONS, clock=clock)

    async def swap_round_keyboard(
        self, chat_id: int, thread_id: int | None, message_id: int | None, *, bot: int = 0
    ) -> int | None:
        key = (bot, chat_id, thread_id or 0)
        before = self._items.pop(key)
        if message_id is not None:
            self._items[key] = message_id
        return before

    async def forget_round_keyboards(self, chat_id: int, *, bot: int = 0) -> int:
        return self._items.discard_where(lambda key: key[:2] == (bot, chat_id))


class RoundKeyboards:
    """Takes the previous round's keyboard away after each reply delivered in a turn."""

    def __init__(self, messages: KeyboardMessages | None = None, *, scope: int = 0) -> None:
        """`scope` is the bot whose conversations these are (`core.domain.telegram_keys`)."""
        self._scope = scope
        self._messages = MemoryKeyboardMessages() if messages is None else messages

    async def delivered(
        self, bot: AnyBot, target: Target, reply: Reply, sent: Sequence[int]
    ) -> None:
        """`reply` went out as the messages `sent` (ids; its keyboard under the last one):
        keep which message carries the conversation's round keyboard now, and take the
        previous one away."""
        current = sent[-1] if sent and not reply.is_final else None
        try:
            before = await self._messages.swap_round_keyboard(
                target.chat_id, target.thread_id, current, bot=self._scope
            )
        except StoreUnavailable as exc:
            log.warning("round keyboard of chat %s not kept: %s", target.chat_id, exc)
            return
        except Exception:  # a nicety: the reply was delivered, nothing else depends on it
            log.exception("round keyboard of chat %s not kept", target.chat_id)
            return
        if before is None or before == current:
            return
        try:
            await edit_reply_markup(bot, target.chat_id, before)
        except TelegramError as exc:  # deleted, too old, already bare: the reply went out
            log.info("old round keyboard in chat %s not taken away: %s", target.chat_id, exc)

    async def forget_chat(self, chat_id: int) -> int:
        """Forget which messages of the chat carry round keyboards (it asked to be forgotten)."""
        return await self._messages.forget_round_keyboards(chat_id, bot=self._scope)
