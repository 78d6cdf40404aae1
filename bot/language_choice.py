"""/language: a person's interface language, shown with a button per language, and chosen.

Invariants:
- the choice is the person's (every chat, private or group), kept in the store; it
  overrides the Telegram `language_code` wherever the bot speaks to that person
  (`apply`, called on every update); without one, or when the store cannot be read,
  the `language_code` decides (`bot.languages.language_for`);
- a button carries `lang:<code>`; only a code of `bot.languages.LANGUAGES` is kept:
  forged data, or a language no longer offered, changes nothing;
- the answer to a choice is in the language chosen.
"""

from __future__ import annotations

import dataclasses
import logging

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.buttons import Press, ignored
from bot.chat import Context, Incoming
from bot.i18n import t
from bot.languages import LANGUAGES, NATIVE_NAMES, is_offered
from bot.say import Say
from core.errors import StoreUnavailable
from core.memory import telegram_person
from core.service import ConsultationService

log = logging.getLogger(__name__)

CHOOSE_LANGUAGE = "lang"
"""The kind of a language button's data: `lang:<code>`."""


def languages_keyboard(current: str) -> InlineKeyboardMarkup:
    """One button per offered language, two a row, named in itself; ✓ on the current one."""
    buttons = [
        InlineKeyboardButton(
            f"✓ {NATIVE_NAMES[code]}" if code == current else NATIVE_NAMES[code],
            callback_data=f"{CHOOSE_LANGUAGE}:{code}",
        )
        for code in LANGUAGES
    ]
    return InlineKeyboardMarkup([buttons[i : i + 2] for i in range(0, len(buttons), 2)])


class LanguageChoice:
    """The /language command, its buttons, and the stored choice applied to each update."""

    def __init__(self, service: ConsultationService, *, say: Say) -> None:
        self._service = service
        self._say = say

    async def apply(self, incoming: Incoming) -> Incoming:
        """`incoming` in the language its sender chose, if they chose an offered one."""
        if incoming.user_id is None:
            return incoming
        try:
            chosen = await self._service.chosen_language(telegram_person(incoming.user_id))
        except StoreUnavailable as exc:  # the client's language is still a good guess
            log.debug("could not read a chosen language: %s", exc)
            return incoming
        if chosen is None or not is_offered(chosen) or chosen == incoming.language:
            return incoming
        return dataclasses.replace(incoming, language=chosen)

    async def command(self, incoming: Incoming, context: Context) -> None:
        """Show the sender's interface language with a button per language."""
        language = incoming.language
        text = t(language, "language_show", language=NATIVE_NAMES[language])
        await self._say(incoming, text, keyboard=languages_keyboard(language))

    async def press(self, incoming: Incoming, value: str, context: Context, press: Press) -> None:
        """Keep the language pressed as the presser's; answer in it."""
        if incoming.user_id is None or not is_offered(value):
            ignored(press.query.data, "not a language choice")
            return
        await self._service.choose_language(telegram_person(incoming.user_id), value)
        await self._say(incoming, t(value, "language_set", language=NATIVE_NAMES[value]))
