"""The console's /role and its waiting line, as a person at a terminal sees them (a real
console process against the fake model server), and the rule a typed /role follows."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.prompting.prompts import RoleInfo
from core.prompting.role_choice import MAX_INSTRUCTION_CHARS, RoleChoice, role_choice
from fakes.model_server import FakeModelServer
from terminal import replies as console_replies
from terminal.replies import StreamPrinter
from tests.terminal.test_console import console

ROLES = {"lawyer": RoleInfo("lawyer", "Lawyer", "You are a lawyer.")}


def test_a_key_chooses_a_persona_a_sentence_an_instruction_and_a_typo_nothing() -> None:
    assert role_choice("  LAWYER ", ROLES) == RoleChoice("lawyer", None, "Lawyer")
    long = "You are a patient tutor " * 200
    choice = role_choice(long, ROLES)
    assert choice is not None and choice.role is None
    assert choice.system_prompt == long.strip()[:MAX_INSTRUCTION_CHARS]
    assert choice.title.startswith("“You are a patient tutor")
    for typo in ("", "   ", "lawyr", "two words", "\x00"):
        assert role_choice(typo, ROLES) is None, typo


async def test_role_lists_the_experts_and_a_choice_reaches_the_next_consultation(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    code, out = await console(
        tmp_path,
        model_server,
        ["/role", "/role lawyr", "/role lawyer", "/role", "Can my landlord keep the deposit?"],
    )
    assert code == 0
    assert "[experts (* in use)" in out
    assert "* expert" in out  # the default, before any choice
    assert "[unknown expert “lawyr”" in out and "nothing changed]" in out
    assert "[expert set to" in out
    assert "* lawyer" in out
    system = model_server.requests[-1]["messages"][0]["content"]
    assert "lawyer" in system.lower()


async def test_an_instruction_of_ones_own_is_what_the_model_is_told(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    code, out = await console(
        tmp_path,
        model_server,
        ["/role Answer like a ship's captain", "/role", "How do I tie a knot?"],
    )
    assert code == 0
    assert "* your instruction: “Answer like a ship's captain”" in out
    system = model_server.requests[-1]["messages"][0]["content"]
    assert "Answer like a ship's captain" in system


async def test_a_slow_model_shows_the_waiting_line_once_before_its_text(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    model_server.enqueue("Which budget do you have in mind?", delay=2.5)
    code, out = await console(tmp_path, model_server, ["Help me choose a laptop"])
    assert code == 0
    assert out.count("[waiting for the model…]") == 1
    assert out.index("[waiting for the model…]") < out.index("Which budget do you have")


async def test_on_a_terminal_the_waiting_line_counts_in_place_and_is_wiped_by_the_text(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(console_replies, "WAITING_AFTER", 0.01)
    printer = StreamPrinter()
    printer.start_waiting(terminal=True)
    shown = ""
    while "s]" not in shown:
        await asyncio.sleep(0.01)
        shown += capsys.readouterr().out
    await printer.feed("Hi")
    shown += capsys.readouterr().out
    assert shown == "\r\x1b[K[waiting for the model… 0 s]\r\x1b[KHi"
    await printer.feed("Hi there")  # no waiting line any more, nothing wiped
    assert capsys.readouterr().out == " there"
