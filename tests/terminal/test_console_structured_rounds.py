"""The console and structured clarifying rounds, as a real process with piped stdin against
the fake model server: options shown under their questions as `1a)`, lines of option
labels answering them, and labels the round does not have refused before anything is sent."""

from __future__ import annotations

from pathlib import Path

from fakes.model_server import FakeModelServer
from tests.terminal.test_console import console

STRUCTURED = {"LLM_STRUCTURED_QUESTIONS": "auto"}


BUDGET = ("What is your budget?", ["< 500", "500–1000"])
USE = ("What is it for?", ["Office", "Games", "Travel"])


def last_user_turn(model: FakeModelServer) -> str:
    return str(model.requests[-1]["messages"][-1]["content"])


async def test_a_round_shows_its_options_and_labels_answer_them(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """The options are printed as `1a)`…, and `1b 2c for work` sends both options as
    question–answer lines with the words after them."""
    model_server.enqueue_round("Two questions.", [BUDGET, USE], chunk_size=9)
    model_server.enqueue_round("Got it.", [("Which screen size?", [])])
    code, out = await console(
        tmp_path, model_server, ["Which laptop?", "1b 2C mostly spreadsheets"], **STRUCTURED
    )
    assert code == 0
    assert (
        f"Two questions.\n\n1. {BUDGET[0]}\n   1a) < 500\n   1b) 500–1000\n"
        f"2. {USE[0]}\n   2a) Office\n   2b) Games\n   2c) Travel\n[round 1 of 3"
    ) in out
    assert out.count(BUDGET[0]) == 1 and out.count("Two questions.") == 1  # streamed once
    assert "{" not in out
    assert last_user_turn(model_server) == (
        f"1. {BUDGET[0]} — 500–1000\n2. {USE[0]} — Travel\nmostly spreadsheets"
    )
    assert "Which screen size?\n[round 2 of 3]" in out


async def test_a_label_the_round_does_not_have_is_refused_and_nothing_is_sent(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """An unknown letter or question number gets one line and sends nothing, nor the
    words after it; a corrected line then answers."""
    model_server.enqueue_round("Got it.", [BUDGET, USE])
    model_server.enqueue_round("Got it.", [("Which screen size?", ["13", "15"])])
    code, out = await console(
        tmp_path,
        model_server,
        ["Which laptop?", "1a 2d", "3a", "1z hello", "1a 2a", "2d printing matters too"],
        **STRUCTURED,
    )
    assert code == 0
    assert "[2d: question 2 has no option d (2a–2c); nothing was sent]" in out
    assert "[3a: there is no question 3 (questions: 1–2); nothing was sent]" in out
    assert "[1z: question 1 has no option z (1a–1b); nothing was sent]" in out
    assert len(model_server.requests) == 2
    assert model_server.requests[1]["messages"][-1]["content"] == (
        f"1. {BUDGET[0]} — < 500\n2. {USE[0]} — Office"
    )
    assert "[2d: there is no question 2 (questions: 1); nothing was sent]" in out


async def test_labels_after_a_restart_answer_the_stored_round(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """A console started again answers the round its consultation last asked."""
    model_server.enqueue_round("Got it.", [BUDGET])
    code, out = await console(tmp_path, model_server, ["Which laptop?"], **STRUCTURED)
    assert "1b) 500–1000" in out
    model_server.enqueue_round("Got it.", [("Which screen size?", [])])
    code, out = await console(tmp_path, model_server, ["1b"], **STRUCTURED)
    assert code == 0
    assert last_user_turn(model_server) == f"{BUDGET[0]} — 500–1000"


async def test_labels_without_a_round_of_options_are_plain_text(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """With no questions asked by option a line like `3d printing` is sent as it is."""
    model_server.enqueue("What do you want to print?")
    code, out = await console(tmp_path, model_server, ["3d printing at home"])
    assert code == 0
    assert last_user_turn(model_server) == "3d printing at home"
    assert "a) " not in out


async def test_the_help_names_the_option_labels(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """The greeting and /help explain answering by option labels."""
    code, out = await console(tmp_path, model_server, ["/help"])
    assert code == 0
    assert out.count("1a 2c TEXT") == 2
    assert model_server.requests == []
