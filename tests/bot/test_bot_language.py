"""The interface language end to end: picked from the Telegram client, chosen with
/language (kept per person, overriding the client), and the command menu per language."""

from __future__ import annotations

import json

import pytest

from bot.transport.menus import set_command_menus
from i18n.languages import LANGUAGES, NATIVE_NAMES, SOURCE, menu_code
from i18n.translate import COMMANDS, t
from tests.bot_harness import (
    ALICE,
    GROUP,
    RunningBot,
    ask_private,
    buttons,
    press,
    sent,
    wait_sent,
)

USER = 611


@pytest.mark.parametrize("language", LANGUAGES)
async def test_a_person_gets_start_and_help_in_their_telegram_language(
    bot: RunningBot, language: str
) -> None:
    """A client set to an offered language (a region variant too) gets /start and /help in
    it, exactly as its catalog words them."""
    code = menu_code(language) + "-XX"
    [start] = await ask_private(bot, USER, "/start", language_code=code)
    assert start == t(language, "start", rounds=3)
    [help_text] = await ask_private(bot, USER, "/help", language_code=code)
    assert help_text == t(
        language, "help", limit=10, rounds=3, username=bot.application.bot.username
    )


@pytest.mark.parametrize("language", LANGUAGES)
async def test_a_consultation_its_buttons_and_errors_speak_the_persons_language(
    bot: RunningBot, language: str
) -> None:
    """In every offered language: the round label and the "final answer now" button of a
    round, and a refusal (a bad /rounds value), as the catalog words them."""
    code = menu_code(language)
    person = USER + 100 + LANGUAGES.index(language)
    [reply] = await ask_private(bot, person, "Plan my garden", language_code=code)
    assert reply.endswith(t(language, "round_label", round=1, max_rounds=3))
    keyboard = sent(bot, person)[-1].params["reply_markup"]["inline_keyboard"]
    labels = [button["text"] for row in keyboard for button in row]
    assert t(language, "answer_button") in labels
    [refused] = await ask_private(bot, person, "/rounds many", language_code=code)
    assert refused == t(language, "rounds_invalid", value="many", limit=10)
    if language != SOURCE:  # really translated, not English by fallback
        assert t(language, "answer_button") != t(SOURCE, "answer_button")


async def test_language_shows_the_current_one_with_a_button_per_language(bot: RunningBot) -> None:
    [text] = await ask_private(bot, USER, "/language", language_code="ru")
    assert text == t("ru", "language_show", language=NATIVE_NAMES["ru"])
    assert buttons(sent(bot, USER)[-1]) == [f"lang:{code}" for code in LANGUAGES]
    keyboard = sent(bot, USER)[-1].params["reply_markup"]["inline_keyboard"]
    labels = [button["text"] for row in keyboard for button in row]
    assert f"✓ {NATIVE_NAMES['ru']}" in labels and NATIVE_NAMES["en"] in labels


async def test_a_chosen_language_overrides_the_telegram_one(bot: RunningBot) -> None:
    """Pressing Russian under /language makes the bot speak Russian to that person
    whatever their client says, in commands and in a consultation's round labels."""
    await ask_private(bot, USER, "/language", language_code="en")
    menu = sent(bot, USER)[-1]
    text = await press(bot, USER, "lang:ru", menu.result["message_id"])
    assert text == t("ru", "language_set", language="Русский")

    [start] = await ask_private(bot, USER, "/start", language_code="en")
    assert start == t("ru", "start", rounds=3)
    [reply] = await ask_private(bot, USER, "Plan my garden", language_code="en")
    assert reply.endswith(t("ru", "round_label", round=1, max_rounds=3))

    other = USER + 1  # someone else's choice is their own
    [start] = await ask_private(bot, other, "/start", language_code="en")
    assert start == t("en", "start", rounds=3)


async def test_forgetting_a_person_forgets_their_language(bot: RunningBot) -> None:
    await ask_private(bot, USER, "/language")
    await press(bot, USER, "lang:ru", sent(bot, USER)[-1].result["message_id"])
    await bot.runtime.engine.memories.forget(f"tg:{USER}")
    [start] = await ask_private(bot, USER, "/start", language_code="en")
    assert start == t("en", "start", rounds=3)


@pytest.mark.parametrize(
    "data",
    ["lang:xx", "lang:", "lang:RU", "lang:ru ", "lang:ru\n", "lang:../ru", "lang:" + "r" * 59],
)
async def test_forged_language_data_changes_nothing(bot: RunningBot, data: str) -> None:
    """Data no language button carries is answered without text and changes nothing."""
    await ask_private(bot, USER, "/language")
    before = len(sent(bot, USER))
    answers = len(bot.api.calls_of("answerCallbackQuery"))
    bot.api.push_update(
        bot.api.callback_query(USER, USER, data, sent(bot, USER)[-1].result["message_id"])
    )
    await bot.api.wait_for(lambda c: c.method == "answerCallbackQuery", count=answers + 1)
    assert "text" not in bot.api.calls_of("answerCallbackQuery")[-1].params
    assert len(sent(bot, USER)) == before
    assert await bot.runtime.engine.languages.of(f"tg:{USER}") is None
    [start] = await ask_private(bot, USER, "/start")
    assert start == t("en", "start", rounds=3)


async def test_a_language_no_longer_offered_is_ignored(bot: RunningBot) -> None:
    """A stored code the bot stopped offering (or never did) falls back to the client's."""
    await bot.runtime.engine.languages.choose(f"tg:{USER}", "xx")
    [start] = await ask_private(bot, USER, "/start", language_code="ru")
    assert start == t("ru", "start", rounds=3)


async def test_the_command_menu_is_set_in_every_offered_language(bot: RunningBot) -> None:
    """setMyCommands once per language and scope: the default (no language_code) in
    English, each other language under its base code, every command described."""
    await set_command_menus(bot.application.bot)
    menus = {
        (json.loads(key)[0]["type"], json.loads(key)[1]): commands
        for key, commands in bot.api.commands.items()
    }
    for language in LANGUAGES:
        code = None if language == SOURCE else menu_code(language)
        for scope in ("all_private_chats", "all_group_chats"):
            commands = menus[(scope, code)]
            assert [c["command"] for c in commands] == list(COMMANDS)
            assert [c["description"] for c in commands] == [
                t(language, f"command_{name}") for name in COMMANDS
            ]
    assert len(menus) == 2 * len(LANGUAGES)


def chat_menus(bot: RunningBot) -> dict[int, list[str]]:
    """The command menus Telegram keeps per chat now: chat id → the descriptions."""
    menus = {}
    for key, commands in bot.api.commands.items():
        scope, code = json.loads(key)
        if scope["type"] == "chat":
            assert code is None
            menus[scope["chat_id"]] = [c["description"] for c in commands]
    return menus


def described_in(language: str) -> list[str]:
    return [t(language, f"command_{name}") for name in COMMANDS]


async def choose(bot: RunningBot, data: str, *, chat: int = USER, user: int = USER) -> None:
    """Press a /language button and wait until the press was handled in full."""
    answers = len(bot.api.calls_of("answerCallbackQuery"))
    bot.api.push_update(bot.api.callback_query(chat, user, data, 1))
    await bot.api.wait_for("answerCallbackQuery", count=answers + 1)


async def test_a_choice_sets_the_private_chats_menu_and_clearing_deletes_it(
    bot: RunningBot,
) -> None:
    """The menu Telegram shows in the person's chat follows /language whatever their client
    says; going back to the client's language deletes the chat's menu, so the menus per
    `language_code` apply again. The menus for everyone are not touched."""
    await ask_private(bot, USER, "/language", language_code="en")
    assert "lang:auto" not in buttons(sent(bot, USER)[-1])  # nothing chosen to clear
    text = await press(bot, USER, "lang:es", sent(bot, USER)[-1].result["message_id"])
    assert text == t("es", "language_set", language="Español")
    await bot.api.wait_for("setMyCommands")
    assert chat_menus(bot) == {USER: described_in("es")}

    await ask_private(bot, USER, "/language", language_code="en")
    assert buttons(sent(bot, USER)[-1])[-1] == "lang:auto"
    keyboard = sent(bot, USER)[-1].params["reply_markup"]["inline_keyboard"]
    assert keyboard[-1][0]["text"] == t("es", "language_client_button")
    text = await press(bot, USER, "lang:auto", sent(bot, USER)[-1].result["message_id"])
    assert text == t("en", "language_cleared", language="English")
    await bot.api.wait_for("deleteMyCommands")
    [deleted] = bot.api.calls_of("deleteMyCommands")
    assert deleted.params["scope"] == {"type": "chat", "chat_id": USER}
    assert chat_menus(bot) == {}
    assert [c.params["scope"]["type"] for c in bot.api.calls_of("setMyCommands")] == ["chat"]


async def test_clearing_answers_in_the_clients_language(bot: RunningBot) -> None:
    await choose(bot, "lang:ru")
    before = len(sent(bot, USER))
    update = bot.api.callback_query(USER, USER, "lang:auto", 1)
    update["callback_query"]["from"]["language_code"] = "de-AT"
    bot.api.push_update(update)
    [text] = (await wait_sent(bot, USER, before + 1))[before:]
    assert text == t("de", "language_cleared", language="Deutsch")


async def test_forget_deletes_the_private_chats_menu(bot: RunningBot) -> None:
    await choose(bot, "lang:it")
    await bot.api.wait_for("setMyCommands")
    assert chat_menus(bot) == {USER: described_in("it")}
    await ask_private(bot, USER, "/forget")
    [delete, _] = buttons(sent(bot, USER)[-1])
    await choose(bot, delete)
    await bot.api.wait_for("deleteMyCommands")
    assert chat_menus(bot) == {}
    [start] = await ask_private(bot, USER, "/start", language_code="en")
    assert start == t("en", "start", rounds=3)


async def test_a_choice_in_a_group_leaves_the_groups_menu(bot: RunningBot) -> None:
    """A member's choice is theirs: it sets the menu of their own private chat with the
    bot (whose id is theirs), never the group's."""
    await choose(bot, "lang:fr", chat=GROUP, user=ALICE)
    await bot.api.wait_for("setMyCommands")
    assert chat_menus(bot) == {ALICE: described_in("fr")}
    [call] = bot.api.calls_of("setMyCommands")
    assert call.params["scope"] == {"type": "chat", "chat_id": ALICE}


@pytest.mark.parametrize(
    ("status", "description", "retry_after"),
    [
        (429, "Too Many Requests: retry after 30", 30),
        (502, "Bad Gateway", None),
        (400, "Bad Request: chat not found", None),
    ],
)
async def test_a_menu_telegram_refuses_fails_nothing_else(
    bot: RunningBot, status: int, description: str, retry_after: int | None
) -> None:
    """Flood control, a network failure or a refusal of the menu: the choice is kept and
    answered, the call is made once (no wait for a flood to pass), and clearing likewise."""
    for method in ("setMyCommands", "deleteMyCommands"):
        bot.api.fail_next(method, status=status, description=description, retry_after=retry_after)
    before = len(sent(bot, USER))
    await choose(bot, "lang:es")
    assert [c.params["text"] for c in sent(bot, USER)[before:]] == [
        t("es", "language_set", language="Español")
    ]
    [start] = await ask_private(bot, USER, "/start", language_code="en")
    assert start == t("es", "start", rounds=3)
    await choose(bot, "lang:auto")
    assert sent(bot, USER)[-1].params["text"] == t("en", "language_cleared", language="English")
    [start] = await ask_private(bot, USER, "/start", language_code="en")
    assert start == t("en", "start", rounds=3)
    assert [c.status for c in bot.api.calls_of("setMyCommands")] == [status]
    assert [c.status for c in bot.api.calls_of("deleteMyCommands")] == [status]
    assert chat_menus(bot) == {}
