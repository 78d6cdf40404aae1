"""Telling a chat that one of its updates was given up (too many attempts, past the
handling deadline, or its handling failed), so the user knows to send it again differently.

Invariant: the text goes where the update came from (the chat, its forum topic, as a reply
to the message in groups), in the language of the update's user; a chat that cannot be
written to is logged, never raised (`bot.say`).
"""

from __future__ import annotations

from telegram import Update

from bot.chat import is_group, language_of, topic_of
from bot.delivery import AnyBot, Target
from bot.i18n import t
from bot.say import Say


async def tell_given_up(bot: AnyBot, update: Update) -> None:
    """Say that this update could not be handled; nothing for an update without a message."""
    message = update.effective_message
    if message is None:
        return
    group = is_group(message)
    target = Target(
        chat_id=message.chat_id,
        thread_id=topic_of(message),
        reply_to=message.message_id if group and update.callback_query is None else None,
        private=not group,
    )
    await Say(bot)(target, t(language_of(update.effective_user), "update_given_up"))
