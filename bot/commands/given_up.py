"""An update given up (too many attempts, past the handling deadline, or its handling
failed): its message is taken back from the consultation, and its chat is told, so the
user knows to send it again differently.

Invariants:
- The message of a turn nothing answered is taken back (`core.turns.lifecycle.Lifecycle.withdraw`),
  so the chat's next turn does not carry the message that broke this one; an answered
  turn stays. Taking it back waits at most `WITHDRAW_WAIT` seconds for the chat, and a
  store that fails is logged: the chat is told either way.
- The text goes where the update came from (the chat, its forum topic, as a reply to the
  message in groups), in the language of the update's user; a chat that cannot be
  written to is logged, never raised (`bot.transport.say`).
"""

from __future__ import annotations

import asyncio
import logging

from telegram import Update

from bot.transport.chat import conversation_key, is_group, language_of, topic_of, turn_id_of
from bot.transport.say import Say
from bot.transport.target import AnyBot, Target
from core.domain.errors import StoreUnavailable
from core.domain.facts import telegram_person
from core.turns.engine import Engine
from i18n.languages import is_offered
from i18n.translate import t

log = logging.getLogger(__name__)

WITHDRAW_WAIT = 10.0
"""How long taking a message back may wait for its chat (the stopped handling letting go)."""


async def give_up(bot: AnyBot, engine: Engine, update: Update, scope: int = 0) -> None:
    """Take the update's unanswered message back, then tell its chat (in the language its
    sender chose, when the store answers in time); `scope` is the bot it came to."""
    await withdraw_given_up(engine, update, scope)
    await tell_given_up(bot, update, await chosen_language(engine, update, scope))


async def chosen_language(engine: Engine, update: Update, scope: int = 0) -> str | None:
    """The offered interface language the update's sender chose; None when they chose
    none, or when the store fails or is slow (the Telegram language is told instead)."""
    user = update.effective_user
    if user is None:
        return None
    try:
        async with asyncio.timeout(WITHDRAW_WAIT):
            chosen = await engine.languages.of(telegram_person(user.id, scope))
    except (TimeoutError, StoreUnavailable):
        return None
    return chosen if chosen is not None and is_offered(chosen) else None


async def withdraw_given_up(engine: Engine, update: Update, scope: int = 0) -> None:
    """Take the update's message back from its chat's consultation if nothing answered it."""
    key = conversation_key(update, scope)
    if key is None:
        return
    try:
        async with asyncio.timeout(WITHDRAW_WAIT):
            withdrawn = await engine.lifecycle.withdraw(key, turn_id_of(update.update_id, scope))
    except (TimeoutError, StoreUnavailable) as error:
        log.warning("update %d given up, its message not taken back: %r", update.update_id, error)
        return
    if withdrawn:
        log.info("update %d given up: its message was taken back from %s", update.update_id, key)


async def tell_given_up(bot: AnyBot, update: Update, language: str | None = None) -> None:
    """Say that this update could not be handled, in `language` or else the sender's
    Telegram language; nothing for an update without a message."""
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
    language = language or language_of(update.effective_user)
    await Say(bot)(target, t(language, "update_given_up"))
