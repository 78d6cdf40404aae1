"""The knowledge base's search offered as a tool (`core.turns.knowledge_tool`): offered when
the knowledge base has documents and KNOWLEDGE_TOOL is on, searching the same knowledge
base, its passages labelled after the turn's own excerpts and citable by those labels."""

from __future__ import annotations

from typing import Any

from core.domain.asking import UserMessage
from core.domain.tools import ToolFailure
from core.llm.llm import OpenAICompleter
from core.prompting.prompts import PromptLibrary
from core.turns.knowledge_tool import NAME
from fakes.model_server import FakeModelServer, ScriptedCall
from tests.knowledge_search import ListedKnowledge, passage
from tests.service_harness import Clock, make_service

WARRANTY = passage(1, "The kettle warranty lasts two years.", title="Warranty terms")
DESCALING = passage(2, "Descale it monthly with citric acid.", title="Care guide")


def knowledge_engine(store: Any, completer: OpenAICompleter, **config: object) -> Any:
    kb = ListedKnowledge([WARRANTY, DESCALING])
    engine = make_service(store, completer, Clock(), knowledge=kb, **config)
    return engine, kb


async def test_the_model_searches_again_and_cites_what_it_found(
    store: Any, completer: OpenAICompleter, model: FakeModelServer
) -> None:
    """The turn's own excerpt is K1; the model's search finds the care guide, labelled
    K2, and the final answer citing [K2] keeps it as its source."""
    engine, kb = knowledge_engine(store, completer, knowledge_tool=True)
    await engine.turns.ask(UserMessage("chat:1", "Warranty length?"))
    model.enqueue_calls(ScriptedCall(NAME, '{"query": "descale citric"}', "k"))
    model.enqueue("Descale it monthly [K2]; the warranty is two years [K1].")
    reply = await engine.turns.answer_now("chat:1")
    offered = model.requests[1]["tools"]
    assert [tool["function"]["name"] for tool in offered] == [NAME]
    assert offered[0]["function"]["description"] == PromptLibrary().knowledge_tool
    assert kb.searches[-1].query == "descale citric"
    result = model.requests[2]["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == "k"
    assert "[K2] Care guide\n> Descale it monthly with citric acid." in result["content"]
    assert "[K1]" not in result["content"]
    assert [(s.ref, s.title) for s in reply.knowledge_sources] == [
        ("K1", "Warranty terms"),
        ("K2", "Care guide"),
    ]
    (use,) = reply.tool_uses
    assert use.server == "knowledge" and use.tool == "search" and use.ok


async def test_a_passage_the_turn_was_given_keeps_its_label(
    store: Any, completer: OpenAICompleter, model: FakeModelServer
) -> None:
    engine, _ = knowledge_engine(store, completer, knowledge_tool=True)
    await engine.turns.ask(UserMessage("chat:1", "Warranty length?"))
    model.enqueue_calls(ScriptedCall(NAME, '{"query": "warranty"}', "k"))
    await engine.turns.answer_now("chat:1")
    content = model.requests[2]["messages"][-1]["content"]
    assert "[K1] Warranty terms" in content and "K2" not in content


async def test_a_round_is_not_offered_the_search_and_the_answer_is(
    store: Any, completer: OpenAICompleter, model: FakeModelServer
) -> None:
    """A clarifying round has the turn's excerpts already; the search is offered to the
    answers (the final one, follow-ups), where a second look pays."""
    engine, _ = knowledge_engine(store, completer, knowledge_tool=True)
    await engine.turns.ask(UserMessage("chat:1", "Warranty length?"))
    await engine.turns.answer_now("chat:1")
    await engine.turns.follow_up("chat:1", "And descaling?")
    round_, answer, follow_up = model.requests
    assert "tools" not in round_
    for body in (answer, follow_up):
        assert [tool["function"]["name"] for tool in body["tools"]] == [NAME]


async def test_a_bad_query_and_a_failed_search_are_errors_the_model_reads(
    store: Any, completer: OpenAICompleter, model: FakeModelServer
) -> None:
    engine, kb = knowledge_engine(store, completer, knowledge_tool=True)
    await engine.turns.ask(UserMessage("chat:1", "Warranty length?"))
    model.enqueue_calls(ScriptedCall(NAME, '{"query": "  "}', "a"))
    reply = await engine.turns.answer_now("chat:1")
    assert model.requests[2]["messages"][-1]["content"].startswith("error: invalid arguments")
    assert reply.tool_uses[0].failure is ToolFailure.INVALID_ARGUMENTS
    model.enqueue_calls(ScriptedCall(NAME, '{"query": "warranty"}', "b"))
    searches = len(kb.searches)
    original = kb.search

    async def failing(query: str, *, role: str | None, limit: int) -> Any:
        if len(kb.searches) > searches:  # the turn's own search went through: not this one
            raise RuntimeError("the index is gone")
        return await original(query, role=role, limit=limit)

    kb.search = failing  # type: ignore[method-assign]
    reply = await engine.turns.follow_up("chat:1", "And the warranty?")
    assert model.requests[-1]["messages"][-1]["content"] == "error: the search failed"
    assert reply.tool_uses[0].failure is ToolFailure.FAILED


async def test_no_knowledge_tool_when_it_is_off_or_the_knowledge_base_is_empty(
    store: Any, completer: OpenAICompleter, model: FakeModelServer
) -> None:
    engine, _ = knowledge_engine(store, completer)  # KNOWLEDGE_TOOL off
    await engine.turns.ask(UserMessage("chat:1", "Warranty length?"))
    empty = make_service(
        store, completer, Clock(), knowledge=ListedKnowledge([]), knowledge_tool=True
    )
    await empty.turns.ask(UserMessage("chat:2", "Warranty length?"))
    assert all("tools" not in body for body in model.requests)
