"""Tool calls counted per tool with the reply's charge (`core.domain.tool_usage`): the real
engine and the real openai SDK against the fake model server, which streams `tool_calls`,
on both stores; the tools are `tests.toolboxes.Tools`. Asserted: what /usage's report
reads back (the person's, the chat's), that a name the model invented counts as
"unknown", and that a turn handled again counts nothing twice."""

from __future__ import annotations

from pathlib import Path

from core.domain.asking import UserMessage
from core.domain.tool_usage import UNKNOWN, ToolCount, counted_name, shown_tool, tool_counts
from core.domain.tools import ToolFailure, ToolUse
from core.domain.usage import Payer, ScopeKind
from core.llm.llm import OpenAICompleter
from fakes.model_server import FakeModelServer, ScriptedCall
from tests.service_harness import Clock, make_service
from tests.store_contract import StoreKind
from tests.toolboxes import CLOCK, FAILING, SAYS, Tools

QUESTION = "Which train should I take to Riga?"


def test_counts_are_by_name_with_failures_and_invented_names_as_unknown() -> None:
    """Calls are counted by the name the model called, failed ones counted as such; a
    name no toolbox offered, or one outside OpenAI's rule, is "unknown"."""
    ok = ToolUse(CLOCK.name, "clock", "now", "{}", "noon")
    failed = ToolUse(FAILING.name, "bad", "fail", "{}", error="gone", failure=ToolFailure.FAILED)
    made_up = ToolUse("a__b", "", "a__b", "{}", error="no", failure=ToolFailure.UNKNOWN_TOOL)
    too_long = ToolUse("é" * 3, "x", "y", "{}", "fine")
    assert counted_name(made_up) == counted_name(too_long) == UNKNOWN
    assert tool_counts([ok, failed, ok, made_up, too_long]) == (
        ToolCount(FAILING.name, 1, 1),
        ToolCount(CLOCK.name, 2, 0),
        ToolCount(UNKNOWN, 2, 1),
    )
    assert tool_counts([]) == ()


def test_a_count_is_shown_as_server_and_tool() -> None:
    assert shown_tool("time__get_current_time") == "time · get_current_time"
    assert shown_tool("knowledge__search") == "knowledge · search"
    assert shown_tool(UNKNOWN) == UNKNOWN
    assert shown_tool("__odd") == "__odd"


async def test_a_tool_turn_is_counted_per_tool_once_on_both_stores(
    kind: StoreKind, database: str, model: FakeModelServer, tmp_path: Path
) -> None:
    """A turn whose model called the clock twice, echo twice, the failing tool once and a
    tool no one offers once: the person's and the chat's report list each tool with its
    calls and failures, today and this month; the same turn handled again (its turn id)
    is replayed and counts nothing more."""
    store = await kind.open(database)
    completer = OpenAICompleter(api_key="k", base_url=model.base_url, timeout=30, max_retries=0)
    try:
        engine = make_service(store, completer, Clock(), toolbox=Tools())
        model.enqueue_calls(
            ScriptedCall(CLOCK.name, "{}", "a"),
            ScriptedCall(SAYS.name, "{}", "b"),
            ScriptedCall("nope__nothing", "{}", "c"),
        )
        model.enqueue_calls(
            ScriptedCall(CLOCK.name, "{}", "d"),
            ScriptedCall(SAYS.name, "{}", "e"),
            ScriptedCall(FAILING.name, "{}", "f"),
        )
        model.enqueue("Take the 14:05.")
        message = UserMessage("chat:1", QUESTION, turn_id="tg:1", payer=Payer(person="tg:501"))
        reply = await engine.turns.ask(message)
        again = await engine.turns.ask(message)
        person = await engine.figures.usage(ScopeKind.PERSON, "tg:501")
        chat = await engine.figures.usage(ScopeKind.CHAT, "chat:1")
    finally:
        await completer.close()
        await store.close()
    assert len(reply.tool_uses) == 6 and again.replayed and len(model.requests) == 3
    counted = (
        ToolCount(FAILING.name, 1, 1),
        ToolCount(CLOCK.name, 2, 0),
        ToolCount(SAYS.name, 2, 0),
        ToolCount(UNKNOWN, 1, 1),
    )
    for report in (person, chat):
        assert report.tools.today == report.tools.month == counted
