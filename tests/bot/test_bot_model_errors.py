"""Model errors no retry can fix, as a Telegram user and the operator's log see them: the
real bot against the fake Bot API and the fake model server."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bot.commands.turns import model_error_text
from core.domain.errors import ModelError, ModelErrorKind
from fakes.bot_api import FakeBotApi
from fakes.model_server import CONTEXT_ERRORS, FakeModelServer
from tests.bot_harness import ask_private, started_bot

USER = 601


async def failed_turn(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer, language: str = "en"
) -> str:
    """Start the bot, send one message (answered by what the test enqueued), return the reply."""
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        [reply] = await ask_private(bot, USER, "Plan my year", language_code=language)
    return reply


@pytest.mark.parametrize(
    ("language", "words"),
    [("en", ("too long", "/reset")), ("ru", ("слишком длинным", "/reset"))],
)
async def test_a_conversation_over_the_context_says_reset_not_retry(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    language: str,
    words: tuple[str, ...],
) -> None:
    """A context overflow tells the user to /reset (no /retry, no "try again"), in their
    language; the log line names HISTORY_BUDGET_CHARS and the model's context size."""
    message, code = CONTEXT_ERRORS["openai"]
    model_server.enqueue(message, status=400, error_code=code)

    reply = await failed_turn(tmp_path, bot_api, model_server, language)

    assert all(word in reply for word in words)
    assert "/retry" not in reply
    [line] = [r.getMessage() for r in caplog.records if "HISTORY_BUDGET_CHARS" in r.getMessage()]
    assert "8192 tokens" in line


async def test_a_stream_ending_before_any_text_says_reset(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """llama.cpp's way of refusing a prompt over its context is explained the same way."""
    model_server.enqueue("", stop_early=True)

    reply = await failed_turn(tmp_path, bot_api, model_server)

    assert "too long" in reply and "/reset" in reply


async def test_a_refused_key_is_a_configuration_problem_logged_as_an_error(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """401 tells the user the bot is misconfigured and the operator knows; the log is an
    ERROR naming OPENAI_API_KEY."""
    model_server.enqueue("Incorrect API key provided", status=401)

    reply = await failed_turn(tmp_path, bot_api, model_server)

    assert "configuration" in reply and "/retry" not in reply
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("OPENAI_API_KEY" in line for line in errors)


@pytest.mark.parametrize("language", ["en", "ru"])
@pytest.mark.parametrize("kind", list(ModelErrorKind))
def test_every_model_failure_has_words_in_each_language(
    kind: ModelErrorKind, language: str
) -> None:
    text = model_error_text(ModelError(kind, "detail for the log"), language)
    assert text.strip() and "detail for the log" not in text
