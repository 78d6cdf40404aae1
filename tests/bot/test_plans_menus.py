"""The payment commands in the command menus and in /help: a bot that sells plans (PLANS)
shows /plans, /paysupport and /terms in every language; one that does not shows none of
them; /refund, an operator's command, is in no menu.

The real bot runs against the fake Bot API (the menus as Telegram keeps them)."""

from __future__ import annotations

import json

import pytest

from bot.transport.menus import set_command_menus
from i18n.languages import LANGUAGES, SOURCE, menu_code
from i18n.translate import COMMANDS, PAYMENT_COMMANDS, t
from tests.bot_harness import RunningBot, ask_private, press, sent

USER = 612
SELLS = pytest.mark.bot_settings(
    admin_user_ids="900",
    plans=json.dumps([{"id": "pro", "title": "Pro", "stars": 250, "days": 30}]),
)
PAYMENT_WORDS = ("/plans", "/paysupport", "/terms", "/refund")


def menus_of(bot: RunningBot) -> dict[tuple[str, str | None], list[dict[str, str]]]:
    """The menus Telegram keeps now: (scope type, language code) → the commands."""
    return {
        (json.loads(key)[0]["type"], json.loads(key)[1]): commands
        for key, commands in bot.api.commands.items()
    }


def help_of(language: str, bot: RunningBot) -> str:
    return t(language, "help", limit=10, rounds=3, username=bot.application.bot.username)


@pytest.mark.parametrize("payments", [True, False])
async def test_every_languages_menu_has_the_payment_commands_only_when_plans_are_sold(
    bot: RunningBot, payments: bool
) -> None:
    """With plans, every language's menus end with /plans, /paysupport and /terms described
    in that language; without, the menus are the usual ones; /refund is never in them."""
    await set_command_menus(bot.application.bot, payments=payments)
    names = COMMANDS + PAYMENT_COMMANDS if payments else COMMANDS
    menus = menus_of(bot)
    for language in LANGUAGES:
        code = None if language == SOURCE else menu_code(language)
        for scope in ("all_private_chats", "all_group_chats"):
            commands = menus[(scope, code)]
            assert [c["command"] for c in commands] == list(names)
            assert [c["description"] for c in commands] == [
                t(language, f"command_{name}") for name in names
            ]
            assert "refund" not in [c["command"] for c in commands]
    assert len(menus) == 2 * len(LANGUAGES)


def test_the_payment_commands_are_described_in_every_language() -> None:
    """Each payment command has its own description in each of the 14 languages."""
    for name in PAYMENT_COMMANDS:
        english = t(SOURCE, f"command_{name}")
        for language in LANGUAGES:
            if language != SOURCE:
                assert t(language, f"command_{name}") != english, (language, name)


@SELLS
@pytest.mark.parametrize("code", ["en", "ru", "ar"])
async def test_help_lists_the_payment_commands_when_plans_are_sold(
    bot: RunningBot, code: str
) -> None:
    """/help ends with /plans, /paysupport and /terms in the person's language."""
    [text] = await ask_private(bot, USER, "/help", language_code=code)
    assert text == help_of(code, bot) + "\n\n" + t(code, "help_payments")
    for command in ("/plans", "/paysupport", "/terms"):
        assert command in text
    assert "/refund" not in text


async def test_help_has_no_payment_commands_without_plans(bot: RunningBot) -> None:
    """A deployment without PLANS shows nothing new in /help."""
    [text] = await ask_private(bot, USER, "/help", language_code="en")
    assert text == help_of("en", bot)
    for word in PAYMENT_WORDS:
        assert word not in text


@SELLS
async def test_a_persons_own_menu_has_the_payment_commands_when_plans_are_sold(
    bot: RunningBot,
) -> None:
    """The menu set in a person's chat after /language has the payment commands too."""
    await ask_private(bot, USER, "/language", language_code="en")
    await press(bot, USER, "lang:de", sent(bot, USER)[-1].result["message_id"])
    await bot.api.wait_for("setMyCommands")
    [(key, commands)] = bot.api.commands.items()
    assert json.loads(key)[0] == {"type": "chat", "chat_id": USER}
    assert [c["command"] for c in commands] == list(COMMANDS + PAYMENT_COMMANDS)
    assert commands[-3]["description"] == t("de", "command_plans")


async def test_a_persons_own_menu_has_no_payment_commands_without_plans(
    bot: RunningBot,
) -> None:
    """Without PLANS the menu set in a person's chat is the usual one."""
    await ask_private(bot, USER, "/language", language_code="en")
    await press(bot, USER, "lang:de", sent(bot, USER)[-1].result["message_id"])
    await bot.api.wait_for("setMyCommands")
    [commands] = bot.api.commands.values()
    assert [c["command"] for c in commands] == list(COMMANDS)
