"""/forget: delete what the bot keeps about a chat, after a confirmation button.

Invariants:
- nothing is deleted by the command itself: its message asks, and only the press on its
  "Delete everything" button by the person who sent /forget, within `CONFIRM_MINUTES`,
  deletes; a press by anyone else, a stale or forged button changes nothing;
- the button's data names the person and the minute it was issued, never anything to
  delete: what goes is always decided from the chat the press comes from;
- what the person said about themselves goes wherever it was kept: their client memory
  in every chat (its facts and preferences). In a private chat the chat goes too: its
  consultations with their messages and idempotency keys, its settings, and the replies
  waiting for delivery. In a group, the group's are deleted only when the person is one
  of its admins at the moment of the press. Their chosen interface language goes with
  their memory, and their private chat's command menu follows (`bot.transport.menus`);
- a turn being answered in the chat is stopped first and stores nothing afterwards
  (`core.turns.lifecycle.Lifecycle.forget`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from telegram import InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import TelegramError

from bot.commands.admins import is_chat_admin
from bot.commands.turns import TurnRunner
from bot.transport.chat import Context, Incoming
from bot.transport.menus import PersonalMenus
from bot.transport.say import Say
from bot.updates.buttons import Press, ignored
from core.turns.engine import Engine
from i18n.translate import t

log = logging.getLogger(__name__)

FORGET = "fg"
CONFIRM_MINUTES = 10
"""How long the confirmation's button deletes, counted from the /forget it answers."""

_DATA = re.compile(r"([1-9][0-9]{0,15}):([1-9][0-9]{0,11}):([yn])")


class Forgetting:
    """The /forget command and its confirmation buttons."""

    def __init__(
        self,
        engine: Engine,
        *,
        turns: TurnRunner,
        say: Say,
        menus: PersonalMenus,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._engine = engine
        self._turns = turns
        self._say = say
        self._menus = menus
        self._clock = clock

    async def command(self, incoming: Incoming, context: Context) -> None:
        """Ask for the confirmation (or refuse a group member who is no admin)."""
        language = incoming.language
        if incoming.user_id is None:  # written as the group itself: no person to confirm
            await self._say(incoming, t(language, "forget_from_yourself"))
            return
        minute = int(self._clock() // 60)
        data = f"{FORGET}:{incoming.user_id}:{minute}"
        keyboard = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton(t(language, "forget_button"), callback_data=f"{data}:y"),
                    InlineKeyboardButton(t(language, "forget_cancel"), callback_data=f"{data}:n"),
                ]
            ]
        )
        key = "forget_confirm"
        if incoming.is_group:
            admin = await is_chat_admin(incoming, context)
            key = "forget_confirm_group" if admin else "forget_confirm_member"
        await self._say(incoming, t(language, key), keyboard=keyboard)

    async def press(self, incoming: Incoming, value: str, context: Context, press: Press) -> None:
        """Delete (or cancel) when the asker presses within the time; refuse anyone else."""
        match = _DATA.fullmatch(value)
        if match is None:
            ignored(press.query.data, "not a forget button")
            return
        language = incoming.language
        asker, minute, confirmed = int(match[1]), int(match[2]), match[3] == "y"
        if incoming.user_id != asker:
            await press.answer(t(language, "forget_not_yours"))
            return
        now = int(self._clock() // 60)
        if not 0 <= now - minute <= CONFIRM_MINUTES:
            await press.answer(t(language, "forget_expired"))
            await self._edit(press, incoming, t(language, "forget_expired"))
            return
        if not confirmed:
            await press.answer()
            await self._edit(press, incoming, t(language, "forget_cancelled"))
            return
        whole_chat = not incoming.is_group or await is_chat_admin(incoming, context)
        if whole_chat:
            await self._engine.lifecycle.forget(incoming.key)
            await self._turns.forget_chat(incoming.chat_id)
        await self._engine.memories.forget(incoming.person(asker))
        log.info(
            "user %s forgotten%s", asker, f" with chat {incoming.chat_id}" if whole_chat else ""
        )
        await press.answer(t(language, "forget_done_popup"))
        await self._edit(press, incoming, t(language, "forget_done"))
        await self._menus.reset(asker)  # their chosen language went with their memory

    async def _edit(self, press: Press, incoming: Incoming, text: str) -> None:
        """Replace the confirmation (and its buttons) with `text`; sent anew if it cannot be
        edited (too old, deleted)."""
        try:
            await press.query.edit_message_text(text)
        except TelegramError as exc:
            log.info("could not edit the /forget confirmation: %s", exc)
            await self._say(incoming, text)
