"""The terminal shows the tools a reply used: a line while one runs, with the reply's text
going on below it, and the "Looked up" list under the reply, failed ones marked, before
its state line; a reply that used none lists nothing. Printed replies, then the real
engine's."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from core.domain.asking import UserMessage
from core.domain.outcomes import Reply
from core.domain.tools import ToolFailure, ToolSpec, ToolUse
from fakes.model_server import FakeModelServer, ScriptedCall
from terminal.replies import StreamPrinter
from terminal.usage import usage_command
from tests.service_harness import Clock, make_service
from tests.toolboxes import Tools

if TYPE_CHECKING:
    from core.llm.llm import OpenAICompleter
    from storage.sqlite.store import SqliteStore

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


async def test_the_engines_tool_calls_reach_the_terminal_and_the_store(
    store: SqliteStore,
    completer: OpenAICompleter,
    model_server: FakeModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The real engine (real SQLite, the real openai SDK against the fake model server
    streaming tool_calls, the test toolbox): the line while the clock runs, the text
    after it, the list under the answer; the answer is stored with its call; /answer's
    path hears its tools too; /usage counts the chat's calls per tool."""
    engine = make_service(store, completer, Clock(), toolbox=Tools(), default_max_rounds=2)
    model_server.enqueue_calls(ScriptedCall("clock__now", '{"tz": "Europe/Paris"}'))
    model_server.enqueue("Which city exactly?")
    printer = StreamPrinter()
    printer.done(
        await engine.turns.ask(
            UserMessage(
                "console:local",
                "What time is it?",
                on_text=printer.feed,
                on_tool=printer.tool_started,
            )
        )
    )
    model_server.enqueue_calls(ScriptedCall("bad__fail"), text="Checking.")
    model_server.enqueue("It is noon.")
    printer = StreamPrinter()
    reply = await engine.turns.answer_now(
        "console:local", on_text=printer.feed, on_tool=printer.tool_started
    )
    printer.done(reply)
    out = capsys.readouterr().out
    assert out == (
        "[Looking up: clock · now…]\n"
        "Which city exactly?\n"
        "Looked up:\n"
        "clock · now (tz=Europe/Paris)\n"
        "[round 1 of 2]\n"
        "Checking.\n"
        "[Looking up: bad · fail…]\n"
        "It is noon.\n"
        "Looked up:\n"
        "bad · fail — failed\n"
        "[final answer, consultation complete; ask about it with > TEXT or /followup TEXT]\n"
    )
    stored = await store.load_latest("console:local")
    assert stored is not None
    replies = [m.tool_uses for m in stored.messages if m.tool_uses]
    assert [[u.name for u in uses] for uses in replies] == [["clock__now"], ["bad__fail"]]
    assert replies[1][0].failure is ToolFailure.UNAVAILABLE
    await usage_command(engine, "console:local")
    usage = capsys.readouterr().out
    assert "[tool calls today: bad · fail 1 (1 failed), clock · now 1]\n" in usage
    assert usage.endswith("[tool calls this month: bad · fail 1 (1 failed), clock · now 1]\n")
