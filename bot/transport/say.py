"""Short UI texts (refusals, confirmations, command answers) sent to a conversation.

A UI text is never worth failing a handler for: a chat that is gone or unreachable
is logged and the handler carries on.
"""

from __future__ import annotations

import logging

from telegram import InlineKeyboardMarkup
from telegram.error import TelegramError

from bot.transport.chat import Incoming
from bot.transport.delivery import Sender
from bot.transport.target import AnyBot, ChatUnavailable, Target

log = logging.getLogger(__name__)


class Say:
    """Send a UI text to where an update came from (or to a `Target`), bound to one bot."""

    def __init__(self, bot: AnyBot) -> None:
        self._bot = bot

    async def __call__(
        self,
        to: Incoming | Target,
        text: str,
        keyboard: InlineKeyboardMarkup | None = None,
    ) -> None:
        target = to.target if isinstance(to, Incoming) else to
        try:
            await Sender(self._bot, target).send_text(text, keyboard=keyboard)
        except (ChatUnavailable, TelegramError) as exc:
            log.info("could not write to chat %s: %s", target.chat_id, exc)
