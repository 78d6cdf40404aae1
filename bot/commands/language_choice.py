"""/language: a person's interface language, shown with a button per language, and chosen.

Invariants:
- the choice is the person's (every chat, private or group), kept in the store; it
  overrides the Telegram `language_code` wherever the bot speaks to that person
  (`apply`, called on every update, reads it through the service's cache,
  `core.turns.chosen_languages`); without one, or when the store cannot be read, the
  `language_code` decides (`i18n.languages.language_for`);
- a button carries `lang:<code>`, or `lang:auto` to clear the choice; only a code of
  `i18n.languages.LANGUAGES` is kept: forged data, or a language no longer offered,
  changes nothing;
- the answer to a choice is in the language chosen (after clearing, the client's); the
  person's private chat menu follows the choice afterwards (`bot.transport.menus`), and its failure
  fails nothing.
"""

from __future__ import annotations

import dataclasses
import logging

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.transport.chat import Context, Incoming, language_of
from bot.transport.menus import PersonalMenus
from bot.transport.say import Say
from bot.updates.buttons import Press, ignored
from core.domain.errors import StoreUnavailable
from core.turns.chosen_languages import ChosenLanguages
from i18n.languages import LANGUAGES, NATIVE_NAMES, is_offered, language_for
from i18n.translate import t

log = logging.getLogger(__name__)

CHOOSE_LANGUAGE = "lang"
"""The kind of a language button's data: `lang:<code>`."""
CLIENT_LANGUAGE = "auto"
"""The value of the button that clears the choice: `lang:auto`."""


def languages_keyboard(current: str, *, chosen: bool) -> InlineKeyboardMarkup:
    """One button per offered language, two a row, named in itself; ✓ on the current one;
    when the person chose one, a last row to go back to their client's language."""
    buttons = [
        InlineKeyboardButton(
            f"✓ {NATIVE_NAMES[code]}" if code == current else NATIVE_NAMES[code],
            callback_data=f"{CHOOSE_LANGUAGE}:{code}",
        )
        for code in LANGUAGES
    ]
    rows = [buttons[i : i + 2] for i in range(0, len(buttons), 2)]
    if chosen:
        back = t(current, "language_client_button")
        data = f"{CHOOSE_LANGUAGE}:{CLIENT_LANGUAGE}"
        rows.append([InlineKeyboardButton(back, callback_data=data)])
    return InlineKeyboardMarkup(rows)


class LanguageChoice:
    """The /language command, its buttons, and the stored choice applied to each update."""

    def __init__(
        self,
        languages: ChosenLanguages,
        *,
        say: Say,
        menus: PersonalMenus,
        language: str | None = None,
    ) -> None:
        """`language`: the bot's own interface language (`BotConfig.language`), which a
        cleared choice goes back to; None: the one the user's client names."""
        self._languages = languages
        self._language = language
        self._say = say
        self._menus = menus

    async def apply(self, incoming: Incoming) -> Incoming:
        """`incoming` in the language its sender chose, if they chose an offered one."""
        chosen = await self._chosen(incoming)
        if chosen is None or chosen == incoming.language:
            return incoming
        return dataclasses.replace(incoming, language=chosen)

    async def command(self, incoming: Incoming, context: Context) -> None:
        """Show the sender's interface language with a button per language."""
        language = incoming.language
        chosen = await self._chosen(incoming) is not None
        text = t(language, "language_show", language=NATIVE_NAMES[language])
        await self._say(incoming, text, keyboard=languages_keyboard(language, chosen=chosen))

    async def press(self, incoming: Incoming, value: str, context: Context, press: Press) -> None:
        """Keep the language pressed as the presser's (or clear it); answer in it."""
        if incoming.user_id is None or not (is_offered(value) or value == CLIENT_LANGUAGE):
            ignored(press.query.data, "not a language choice")
            return
        person = incoming.person(incoming.user_id)
        if value == CLIENT_LANGUAGE:
            await self._languages.clear(person)
            language = (
                language_for(self._language)
                if self._language
                else language_of(press.query.from_user)
            )
            await self._say(
                incoming, t(language, "language_cleared", language=NATIVE_NAMES[language])
            )
            await self._menus.reset(incoming.user_id)
            return
        await self._languages.choose(person, value)
        await self._say(incoming, t(value, "language_set", language=NATIVE_NAMES[value]))
        await self._menus.show(incoming.user_id, value)

    async def _chosen(self, incoming: Incoming) -> str | None:
        """The offered language the sender chose; None when none (or the store fails)."""
        if incoming.user_id is None:
            return None
        try:
            chosen = await self._languages.of(incoming.person(incoming.user_id))
        except StoreUnavailable as exc:  # the client's language is still a good guess
            log.debug("could not read a chosen language: %s", exc)
            return None
        return chosen if chosen is not None and is_offered(chosen) else None
