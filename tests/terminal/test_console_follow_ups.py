"""Follow-ups in the console: `/followup TEXT` and a `>` line right after a final answer,
through the real console process, the fake model server and a real SQLite file."""

from __future__ import annotations

from pathlib import Path

from fakes.model_server import FakeModelServer
from tests.terminal.test_console import console


async def test_followup_and_a_quoted_line_ask_about_the_final_answer(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """/followup asks about the final answer, a `>` line right after it too; the model is
    sent the consultation and each follow-up; the state line counts them."""
    model_server.enqueue("Use PostgreSQL.")
    model_server.enqueue("Pool the connections.")
    model_server.enqueue("Add a replica.")
    code, out = await console(
        tmp_path,
        model_server,
        ["/rounds 1", "How do I scale?", "/followup And connections?", "> And reads?"],
        FOLLOWUP_LIMIT="2",
    )
    assert code == 0
    assert "Pool the connections.\n[follow-up 1 of 2, consultation complete; ask about it" in out
    assert "Add a replica.\n[follow-up 2 of 2, consultation complete]" in out
    assert [m["content"] for m in model_server.requests[-1]["messages"][1:]] == [
        "How do I scale?",
        "Use PostgreSQL.",
        "And connections?",
        "Pool the connections.",
        "And reads?",
    ]


async def test_refused_follow_ups_get_one_line_and_no_model_call(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """Without a finished consultation /followup says so; in the middle of one a `>` line is
    an ordinary message; past the limit the reason names FOLLOWUP_LIMIT."""
    model_server.enqueue("Which database?")
    code, out = await console(
        tmp_path,
        model_server,
        ["/followup Anything?", "/followup", "Help me scale", "> quoted text", "/followup More?"],
        FOLLOWUP_LIMIT="1",
    )
    assert code == 0
    assert "[there is no finished consultation to ask about" in out
    assert "[usage: /followup TEXT" in out
    assert model_server.requests[-1]["messages"][-1]["content"] == "> quoted text"
    assert (
        "[the consultation has no final answer yet: just type your message; nothing was sent]"
        in out
    )
    assert len(model_server.requests) == 2
