"""Structured rounds in Telegram against real servers' habits (real Application, fake Bot
API, fake model server, real SQLite file, the SDK retrying once): prose where JSON was
asked is the round the user reads, one model call per round; llama-cpp-python's server,
which refuses json_schema with a 500, gives rounds with option buttons."""

from __future__ import annotations

import pytest

from core.domain.clarifying import SCHEMA_NAME
from fakes.bot_api import Call
from fakes.model_server import FakeModelServer, response_format_of
from tests.bot_harness import RunningBot, sent, wait_sent

USER = 5301


pytestmark = pytest.mark.bot_settings(llm_structured_questions="auto")


async def ask(bot: RunningBot, text: str) -> Call:
    """Send a private message; the bot's reply (the message that carries the footer)."""
    before = len(sent(bot, USER))
    await bot.send(USER, text)
    await wait_sent(bot, USER, before + 1)
    return sent(bot, USER)[-1]


def buttons(call: Call) -> list[str]:
    markup = call.params.get("reply_markup") or {}
    return [b["text"] for row in markup.get("inline_keyboard", []) for b in row]


async def test_a_prose_round_is_what_the_user_reads_after_one_call(
    bot: RunningBot, model_server: FakeModelServer
) -> None:
    """The first round after the start is the prose the model wrote (one call); the next
    round is asked in text (one call)."""
    model_server.ignore_format = True
    model_server.enqueue("What is your budget, roughly?")
    first = await ask(bot, "Which laptop?")
    assert first.params["text"].startswith("What is your budget, roughly?")
    assert len(model_server.requests) == 1

    model_server.enqueue("And which screen size?")
    second = await ask(bot, "About 800")
    assert second.params["text"].startswith("And which screen size?")
    assert [response_format_of(body) for body in model_server.requests] == [SCHEMA_NAME, None]


async def test_llama_cpp_pythons_server_gives_option_buttons(
    bot: RunningBot, model_server: FakeModelServer
) -> None:
    """json_schema refused with a 500 naming response_format (not retried by the SDK), then
    the round in json_object with its schema: its options are buttons."""
    model_server.refuse_format = "llama-cpp-python-500"
    model_server.enqueue_round("Got it.", [("Budget?", ["Low", "High"])])
    reply = await ask(bot, "Which laptop?")

    assert reply.params["text"].startswith("Got it.\n\nBudget?")
    assert buttons(reply)[:2] == ["Low", "High"]
    assert [response_format_of(body) for body in model_server.requests] == [
        SCHEMA_NAME,
        "json_object",
    ]
