"""Each edge words every way a turn did not happen (`core.domain.errors.TurnDidNotHappen`) in one
function: the bot's text and log line, the API's status, code and log line, the console's
line. A new member of the family fails here until it has an example, and then until each
edge words it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from api.chat import did_not_happen
from app.settings import load_settings
from bot.commands.turns import did_not_happen_text
from bot.transport.outage import OutageNotices
from core.domain.errors import (
    ModelError,
    ModelErrorKind,
    StoreUnavailable,
    TurnCancelled,
    TurnDidNotHappen,
    TurnSuperseded,
)
from i18n.translate import t
from terminal.repl import did_not_happen_line

CHAT = 4242

EXAMPLES: dict[type[TurnDidNotHappen], TurnDidNotHappen] = {
    ModelError: ModelError(ModelErrorKind.TIMEOUT, "no answer in 10 s"),
    StoreUnavailable: StoreUnavailable("disk full"),
    TurnCancelled: TurnCancelled("the turn was stopped while the model answered"),
    TurnSuperseded: TurnSuperseded("another worker answered round 1"),
}
"""One of each member (a direct subclass: a subclass of a member is worded as that member)."""

MEMBERS = list(EXAMPLES)


def test_every_member_of_the_family_has_an_example() -> None:
    assert set(TurnDidNotHappen.__subclasses__()) == set(EXAMPLES)


def records(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == logger]


# -- the bot ------------------------------------------------------------------------------

BOT_TOLD: dict[type[TurnDidNotHappen], tuple[str | None, int]] = {
    # /retry helps
    ModelError: (t("en", "model_error", reason=t("en", "reason_timeout")), logging.WARNING),
    # send it again: no inbox keeps it
    StoreUnavailable: (t("en", "store_unavailable"), logging.WARNING),
    TurnCancelled: (None, logging.INFO),  # the /reset that stopped it answers
    TurnSuperseded: (None, logging.INFO),  # whoever answered the round told the user
}
"""What the chat is told (None: nothing), and the log line's level."""


@pytest.mark.parametrize("member", MEMBERS, ids=lambda member: member.__name__)
def test_the_bot_words_every_member(
    member: type[TurnDidNotHappen], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="bot.commands.turns"):
        text = did_not_happen_text(EXAMPLES[member], CHAT, "en", OutageNotices())

    told, level = BOT_TOLD[member]
    assert text == told
    [record] = records(caplog, "bot.commands.turns")
    assert record.levelno == level and str(CHAT) in record.getMessage()


def test_the_bot_tells_an_outage_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    outage = OutageNotices(clock=lambda: 100.0)
    texts = [did_not_happen_text(StoreUnavailable("disk full"), CHAT, "en", outage) for _ in "ab"]
    assert texts == [t("en", "store_unavailable"), None]


# -- the HTTP API -------------------------------------------------------------------------

API_ERROR: dict[type[TurnDidNotHappen], tuple[int, str, int]] = {
    ModelError: (504, "MODEL_TIMEOUT", logging.WARNING),
    StoreUnavailable: (503, "STORE_UNAVAILABLE", logging.WARNING),
    TurnCancelled: (500, "INTERNAL_ERROR", logging.ERROR),  # no reset in the API: a fault
    TurnSuperseded: (409, "CONFLICT", logging.INFO),  # another worker answered the round
}
"""The status and code the client gets, and the log line's level."""


@pytest.mark.parametrize("member", MEMBERS, ids=lambda member: member.__name__)
def test_the_api_words_every_member(
    member: type[TurnDidNotHappen], caplog: pytest.LogCaptureFixture
) -> None:
    exc = EXAMPLES[member]
    with caplog.at_level(logging.DEBUG, logger="api.chat"):
        error = did_not_happen(exc, "s-1")

    status, code, level = API_ERROR[member]
    assert (error.status, error.code) == (status, code)
    assert error.body()["sessionId"] == "s-1"  # the same message to this session retries it
    assert str(exc) not in error.message  # the detail is the log's
    [record] = records(caplog, "api.chat")
    assert record.levelno == level and "s-1" in record.getMessage()


# -- the console --------------------------------------------------------------------------

CONSOLE_LINE = {
    ModelError: "did not answer within LLM_TIMEOUT_SECONDS (10 s); your message is saved",
    StoreUnavailable: f"[{t('en', 'store_unavailable')} (disk full)]",
    TurnCancelled: "stopped by a reset",
    TurnSuperseded: "answered this round meanwhile; /status shows where it stands",
}


@pytest.mark.parametrize("member", MEMBERS, ids=lambda member: member.__name__)
def test_the_console_words_every_member(member: type[TurnDidNotHappen], tmp_path: Path) -> None:
    settings = load_settings(
        openai_api_key="test-key",
        llm_model="test-model",
        db_path=tmp_path / "console.sqlite3",
        llm_timeout_seconds=10,
        _env_file=None,
    )
    line = did_not_happen_line(EXAMPLES[member], settings)

    assert CONSOLE_LINE[member] in line
    assert line.startswith("[") and line.endswith("]")
