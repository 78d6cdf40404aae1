"""The terminal shows the tools a reply used: a line while one runs, with the reply's text
going on below it, and the "Looked up" list under the reply, failed ones marked, before
its state line; a reply that used none lists nothing."""

from __future__ import annotations

import pytest

from core.domain.outcomes import Reply
from core.domain.tools import ToolFailure, ToolSpec, ToolUse
from terminal.replies import StreamPrinter

TIME = ToolSpec("time__get_current_time", "time", "get_current_time", "The time now.")
PARIS = ToolUse(
    "time__get_current_time", "time", "get_current_time", '{"timezone": "Europe/Paris"}', "03:00"
)
GONE = ToolUse(
    "docs__search",
    "docs",
    "search",
    '{"query": "hours"}',
    error="the server is gone",
    failure=ToolFailure.UNAVAILABLE,
)


def final(text: str, *uses: ToolUse) -> Reply:
    return Reply(text, "c1", 1, 1, is_final=True, is_complete=True, model="m", tool_uses=uses)


async def test_a_running_tool_has_its_line_and_the_answer_lists_what_it_looked_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The line comes where the tool started, the text goes on right below it (the blank
    lines the engine puts between the text before and after a tool are not printed); the
    list names each tool with its short arguments, the failed one marked."""
    printer = StreamPrinter()
    await printer.feed("Let me check.")
    await printer.tool_started(TIME)
    await printer.feed("Let me check.\n\n")
    await printer.feed("Let me check.\n\nIt is 3 a.m.")
    printer.done(final("Let me check.\n\nIt is 3 a.m.", PARIS, GONE))
    assert capsys.readouterr().out == (
        "Let me check.\n"
        "[Looking up: time · get_current_time…]\n"
        "It is 3 a.m.\n"
        "Looked up:\n"
        "time · get_current_time (timezone=Europe/Paris)\n"
        "docs · search (query=hours) — failed\n"
        "[final answer, consultation complete]\n"
    )


async def test_a_reply_without_tools_lists_none(capsys: pytest.CaptureFixture[str]) -> None:
    printer = StreamPrinter()
    await printer.tool_started(TIME)
    await printer.feed("Three.")
    printer.done(final("Three."))
    assert capsys.readouterr().out == (
        "[Looking up: time · get_current_time…]\nThree.\n[final answer, consultation complete]\n"
    )
