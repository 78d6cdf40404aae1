""" "Final answer now" keeps the conversation's language: the request stored as the user's turn
is in the user's language, and the system prompt names the language to answer in. End to end:
the real PTB Application against the fake Bot API, the real openai SDK against the fake model
server (which records what the model was sent), a real SQLite file; the console as a process."""

from __future__ import annotations

from pathlib import Path

from core.prompting.final_now import request_template
from core.prompting.prompts import PromptLibrary
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from i18n.languages import language_for
from tests.bot_harness import (
    RunningBot,
    ask_private,
    conversation,
    sent,
    started_bot,
    system_prompt,
    wait_sent,
)
from tests.terminal.test_console import console

USER = 7070
RUSSIAN_REQUEST = "Пожалуйста, дайте итоговый ответ сейчас."
ENGLISH_REQUEST = "Please give me your final answer now."


async def press_answer_now(bot: RunningBot, language_code: str) -> str:
    """Press "final answer now" under the last message as a user with that Telegram language."""
    before = len(sent(bot, USER))
    update = bot.api.callback_query(USER, USER, "answer", sent(bot, USER)[-1].result["message_id"])
    update["callback_query"]["from"]["language_code"] = language_code
    bot.api.push_update(update)
    return (await wait_sent(bot, USER, before + 1))[before]


async def test_a_russian_user_pressing_answer_now_is_asked_and_answered_in_russian(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The model receives the request in Russian and is told to answer in Russian."""
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        model_server.enqueue("Какой у вас участок?")
        await ask_private(bot, USER, "Помоги спланировать сад на даче", language_code="ru")
        model_server.enqueue("## План сада")
        final = await press_answer_now(bot, "ru")
    assert "План сада" in final and "Итоговый ответ" in final
    request = model_server.requests[-1]
    assert conversation(request)[-1] == RUSSIAN_REQUEST
    assert "Answer in Russian" in system_prompt(request)
    assert "asked for your final answer now" in system_prompt(request)


async def test_answer_command_names_the_written_language_whatever_the_ui_language(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A user whose Telegram is in English but who writes Russian: the request follows the
    UI language, the answer the language written in."""
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        model_server.enqueue("Какой у вас участок?")
        await ask_private(bot, USER, "Помоги спланировать сад на даче")
        await ask_private(bot, USER, "/answer")
    request = model_server.requests[-1]
    assert conversation(request)[-1] == ENGLISH_REQUEST
    assert "Answer in Russian" in system_prompt(request)


async def test_an_english_conversation_is_answered_in_english(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        model_server.enqueue("How big is the plot?")
        await ask_private(bot, USER, "Help me plan the garden at my country house")
        await press_answer_now(bot, "en")
    request = model_server.requests[-1]
    assert conversation(request)[-1] == ENGLISH_REQUEST
    assert "Answer in English" in system_prompt(request)


async def test_a_language_that_cannot_be_told_is_not_guessed(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A German conversation is not called English: the prompt says to keep the language
    the user has been writing in, and that the request for the answer does not count."""
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        model_server.enqueue("Wie groß ist das Grundstück?")
        await ask_private(bot, USER, "Hilf mir, den Garten zu planen", language_code="de")
        await press_answer_now(bot, "de")
    request = model_server.requests[-1]
    prompt = system_prompt(request)
    interface = language_for("de")  # German once its catalog is offered, English before
    assert conversation(request)[-1] == PromptLibrary().render(request_template(interface))
    assert "Answer in English" not in prompt and "Answer in Russian" not in prompt
    assert "language the user has been writing in" in prompt


async def test_console_answer_follows_a_russian_conversation(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """The console has no UI language: the conversation's own language decides."""
    model_server.enqueue("Какой у вас участок?")
    model_server.enqueue("План сада")
    code, out = await console(
        tmp_path, model_server, ["Помоги спланировать сад на даче", "/answer"]
    )
    assert code == 0 and "План сада" in out
    request = model_server.requests[-1]
    assert conversation(request)[-1] == RUSSIAN_REQUEST
    assert "Answer in Russian" in system_prompt(request)
