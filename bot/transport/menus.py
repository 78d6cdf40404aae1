"""The command menus: one per offered language for everyone, and one for the private chat
of a person who chose a language with /language.

Invariants:
- every offered language has a menu for private chats and one for groups, under its base
  `language_code` (English is the default menu), so a client set to it sees it;
- a person's private chat with the bot (its chat id is their user id) shows the menu in the
  language they chose, wherever they chose it; clearing the choice, or forgetting the
  person, deletes that chat's menu, so the `language_code` menus apply there again. A
  group's menu is never changed for one of its members;
- a menu is a nicety: a call that fails (network, flood control, a person who never opened
  a private chat with the bot) is logged and fails nothing else. It is made once, never
  waited for and retried (a flood wait would hold the chat's next updates): the person's
  next choice sets it again;
- a bot with a language of its own (a stored bot's profile `language`) describes every one
  of those menus in it, as it speaks it to every client, so no client's `language_code`
  menu of another language is left from before;
- a bot that sells plans (PLANS) adds /plans, /paysupport and /terms to every menu; one
  that does not shows none of them. /refund, /cancelsub and /resumesub are in no menu:
  menus are everyone's, and they answer only operators.
"""

from __future__ import annotations

import logging

from telegram import (
    BotCommand,
    BotCommandScopeAllGroupChats,
    BotCommandScopeAllPrivateChats,
    BotCommandScopeChat,
)
from telegram.error import TelegramError

from bot.transport.target import NO_RETRIES, AnyBot
from i18n.languages import LANGUAGES, SOURCE, menu_code
from i18n.translate import COMMANDS, PAYMENT_COMMANDS, texts_once

log = logging.getLogger(__name__)


def commands_in(language: str, *, payments: bool = False) -> list[BotCommand]:
    """The command menu, described in `language` (its catalog is not kept for the menu:
    every offered language's menu is made at start-up, most of them for no one here);
    with `payments`, the commands of a bot that sells plans too."""
    names = COMMANDS + PAYMENT_COMMANDS if payments else COMMANDS
    descriptions = texts_once(language, (f"command_{name}" for name in names))
    return [BotCommand(name, text) for name, text in zip(names, descriptions, strict=True)]


async def set_command_menus(
    bot: AnyBot, *, payments: bool = False, language: str | None = None
) -> None:
    """Command menus for private chats and groups: the default one in English, and one per
    other offered language for clients set to it (`language_code`: the base language), each
    in that language, or all in the bot's own `language` when it has one; `payments` when
    the bot sells plans."""
    own = None if language is None else commands_in(language, payments=payments)
    for language_code in LANGUAGES:
        commands = own or commands_in(language_code, payments=payments)
        code = None if language_code == SOURCE else menu_code(language_code)
        for scope in (BotCommandScopeAllPrivateChats(), BotCommandScopeAllGroupChats()):
            try:
                await bot.set_my_commands(commands, scope=scope, language_code=code)
            except Exception as exc:  # a menu is a nicety; the bot works without it
                log.warning("could not set the command menu: %s", exc)


class PersonalMenus:
    """The menu of a person's private chat, in the language they chose."""

    def __init__(self, bot: AnyBot, *, payments: bool = False) -> None:
        self._bot = bot
        self._payments = payments

    async def show(self, user_id: int, language: str) -> None:
        """Describe the commands in `language` in the person's private chat."""
        scope = BotCommandScopeChat(user_id)
        try:
            await self._bot.set_my_commands(
                commands_in(language, payments=self._payments),
                scope=scope,
                rate_limit_args=NO_RETRIES,
            )
        except TelegramError as exc:
            log.info("could not set the command menu of chat %s: %s", user_id, exc)

    async def reset(self, user_id: int) -> None:
        """Give the person's private chat the menu of their client's language again."""
        scope = BotCommandScopeChat(user_id)
        try:
            await self._bot.delete_my_commands(scope=scope, rate_limit_args=NO_RETRIES)
        except TelegramError as exc:
            log.info("could not delete the command menu of chat %s: %s", user_id, exc)
