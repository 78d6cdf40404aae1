"""What real servers do with a structured request, through the real engine, the real
openai SDK and the fake model server taught their habits: a server that ignores
`response_format` and writes prose costs one model call per round from the first round on
every worker, and llama-cpp-python's server, which refuses json_schema but takes
`json_object` with the schema, gives structured rounds; the client-memory call shares
what the rounds learned of the endpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.domain.asking import UserMessage
from core.domain.clarifying import ROUND_SCHEMA, SCHEMA_NAME, ClarifyingRound, Question
from core.domain.errors import ModelError, ModelErrorKind
from core.domain.facts import FACTS_SCHEMA, memory_scope
from core.domain.facts import SCHEMA_NAME as FACTS_SCHEMA_NAME
from core.domain.outcomes import Notice
from core.llm.llm import OpenAICompleter
from core.prompting.clarifying_call import MAX_ROUND_CHARS
from core.turns.engine import Engine
from fakes.model_server import FakeModelServer, response_format_of, schema_asked, text_of
from storage.sqlite.store import SqliteStore
from tests.service_harness import Clock, MakeEngine, make_service

SCOPE = memory_scope("tg:7")


@pytest.fixture
async def second_completer(model: FakeModelServer) -> AsyncIterator[OpenAICompleter]:
    """Another process's client of the same model server (its own memory of it)."""
    client = OpenAICompleter(api_key="k", base_url=model.base_url, timeout=30, max_retries=0)
    yield client
    await client.close()


def kinds(model: FakeModelServer) -> list[str | None]:
    """What each request asked for: a schema's name (in either form) or None (text)."""
    return [schema_asked(body) for body in model.requests]


async def test_prose_for_a_structured_round_is_one_call_per_round_on_every_worker(
    engine: MakeEngine,
    model: FakeModelServer,
    store: SqliteStore,
    second_completer: OpenAICompleter,
) -> None:
    """A server that ignores response_format writes its rounds in prose: the first round
    after a start is the prose it wrote, on each worker (two services on one store, each
    with its own client), never asked twice; later rounds are asked in text."""
    model.ignore_format = True
    first_worker = engine(structured_questions="auto")
    second_worker = make_service(store, second_completer, Clock(), structured_questions="auto")

    shown = await first_worker.turns.ask(UserMessage("tg:1", "Which laptop?"))
    assert shown.text == "Reply to: Which laptop?" and shown.questions is None
    assert len(model.requests) == 1
    assert (
        await first_worker.turns.ask(UserMessage("tg:1", "A light one"))
    ).text == "Reply to: A light one"
    assert len(model.requests) == 2

    other = await second_worker.turns.ask(UserMessage("tg:2", "Which phone?"))
    assert other.text == "Reply to: Which phone?"
    assert len(model.requests) == 3
    moved = await second_worker.turns.ask(
        UserMessage("tg:1", "Under 1000")
    )  # the first chat, on the second
    assert moved.text == "Reply to: Under 1000"
    assert len(model.requests) == 4

    assert kinds(model) == [SCHEMA_NAME, None, SCHEMA_NAME, None]
    assert "[[FINAL]]" in text_of(model.requests[1]["messages"][0]["content"])


async def test_llama_cpp_pythons_server_gives_structured_rounds_as_json_object(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """json_schema answered by a 500 naming response_format, as llama-cpp-python's server
    does: the round is asked as `json_object` with the round's schema, its options reach
    the user, and later rounds go straight to that form (one refused call per process)."""
    model.refuse_format = "llama-cpp-python-500"
    service = engine(structured_questions="auto")
    model.enqueue_round("Two facts.", [("Budget?", ["Low", "High"]), ("City?", [])])
    model.enqueue_round("One more.", [("Screen?", ["13 inch", "15 inch"])])

    first = await service.turns.ask(UserMessage("tg:1", "Which laptop?"))
    second = await service.turns.ask(UserMessage("tg:1", "Low, Berlin"))

    assert first.questions == ClarifyingRound(
        "Two facts.", (Question("Budget?", ("Low", "High")), Question("City?"))
    )
    assert second.questions is not None and second.questions.has_options
    assert [response_format_of(body) for body in model.requests] == [
        SCHEMA_NAME,
        "json_object",
        "json_object",
    ]
    assert model.requests[1]["response_format"] == {"type": "json_object", "schema": ROUND_SCHEMA}


async def test_client_memory_asks_in_the_form_the_rounds_learned(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """After a round learned that the endpoint takes json_object with the schema, the
    facts of the consultation are asked in that form at once: no second refused call."""
    model.refuse_format = "llama-cpp-python-500"
    service = engine(structured_questions="auto")
    await service.settings.set_max_rounds("tg:7", 2)
    model.enqueue_round("", [("Where do you live?", [])])
    await service.turns.ask(UserMessage("tg:7", "Which plants for my garden?", memory=SCOPE))
    model.enqueue("Plant tomatoes.")
    final = await service.turns.ask(UserMessage("tg:7", "Riga", memory=SCOPE))
    model.enqueue('{"facts": ["Lives in Riga"]}')

    update = await service.memories.remember(final.consultation_id)

    assert [f.text for f in update.facts] == ["Lives in Riga"]
    assert kinds(model) == [SCHEMA_NAME, SCHEMA_NAME, None, FACTS_SCHEMA_NAME]
    assert [response_format_of(body) for body in model.requests].count(SCHEMA_NAME) == 1
    assert model.requests[-1]["response_format"] == {"type": "json_object", "schema": FACTS_SCHEMA}


async def test_client_memory_of_a_prose_writer_is_asked_in_text_at_once(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """After a round came as prose, the facts are asked in text (one a line) with one
    call, not first as JSON the endpoint would answer in prose again."""
    model.ignore_format = True
    service = engine(structured_questions="auto")
    await service.settings.set_max_rounds("tg:7", 2)
    await service.turns.ask(UserMessage("tg:7", "Which plants for my garden?", memory=SCOPE))
    final = await service.turns.ask(UserMessage("tg:7", "I live in Riga", memory=SCOPE))
    model.enqueue("Lives in Riga")

    update = await service.memories.remember(final.consultation_id)

    assert [f.text for f in update.facts] == ["Lives in Riga"]
    assert kinds(model) == [SCHEMA_NAME, None, None]
    assert "one per line" in text_of(model.requests[-1]["messages"][0]["content"])


async def test_under_on_prose_is_shown_and_json_is_asked_for_still(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """LLM_STRUCTURED_QUESTIONS=on keeps asking for JSON; a prose reply is still the
    round, one call each."""
    model.ignore_format = True
    service: Engine = engine(structured_questions="on")
    first = await service.turns.ask(UserMessage("tg:1", "Which laptop?"))
    second = await service.turns.ask(UserMessage("tg:1", "A light one"))

    assert (first.text, second.text) == ("Reply to: Which laptop?", "Reply to: A light one")
    assert kinds(model) == [SCHEMA_NAME, SCHEMA_NAME]


@pytest.fixture
async def retrying(model: FakeModelServer) -> AsyncIterator[OpenAICompleter]:
    """A client with the SDK's retries, as deployed (the fake's errors ask for 1 ms waits)."""
    client = OpenAICompleter(api_key="k", base_url=model.base_url, timeout=30, max_retries=2)
    yield client
    await client.close()


async def test_a_refused_form_costs_one_request_whatever_the_retries(
    model: FakeModelServer, store: SqliteStore, retrying: OpenAICompleter
) -> None:
    """llama-cpp-python's 500 for json_schema is not retried by the SDK: the first round
    after a start costs one refused request, then the round."""
    model.refuse_format = "llama-cpp-python-500"
    service = make_service(store, retrying, Clock(), structured_questions="auto")
    reply = await service.turns.ask(UserMessage("tg:1", "Which laptop?"))

    assert reply.questions == ClarifyingRound("", (Question("Reply to: Which laptop?"),))
    assert [response_format_of(body) for body in model.requests] == [SCHEMA_NAME, "json_object"]


async def test_an_outage_at_the_first_structured_call_is_retried_as_any_call_is(
    model: FakeModelServer, store: SqliteStore, retrying: OpenAICompleter
) -> None:
    """A 503 that names no response format, at the first structured call: the call is made
    again with the SDK's retries, and the round comes in the form asked."""
    model.enqueue("overloaded", status=503)
    model.enqueue("overloaded", status=503)
    model.enqueue_round("", [("Budget?", ["Low", "High"])])
    service = make_service(store, retrying, Clock(), structured_questions="auto")
    reply = await service.turns.ask(UserMessage("tg:1", "Which laptop?"))

    assert reply.questions == ClarifyingRound("", (Question("Budget?", ("Low", "High")),))
    assert kinds(model) == [SCHEMA_NAME] * 3


async def test_a_hang_up_followed_by_an_outage_is_not_learned_as_a_refusal(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """A hang-up at json_schema (one way to refuse it), then 503s for json_object: the
    server is down; the turn fails, and the next round asks for json_schema again."""
    service = engine(structured_questions="auto")
    model.enqueue(drop=True)
    model.enqueue("down", status=503)
    model.enqueue("down", status=503)
    with pytest.raises(ModelError) as info:
        await service.turns.ask(UserMessage("tg:1", "Which laptop?"))
    assert info.value.kind is ModelErrorKind.UNAVAILABLE

    await service.turns.ask(UserMessage("tg:2", "Which phone?"))
    assert [response_format_of(body) for body in model.requests] == [
        SCHEMA_NAME,
        "json_object",
        "json_object",
        SCHEMA_NAME,
    ]


async def test_endless_prose_for_a_round_is_cut_shown_as_text_and_stored_once(
    engine: MakeEngine, model: FakeModelServer, store: SqliteStore
) -> None:
    """A server streaming prose that never ends, in small pieces: the reply is cut (within
    the round's character cap), marked incomplete, stored once as the round's reply; what
    the user saw while it streamed holds no JSON."""
    model.enqueue("Tell me more. " * 10, endless=True, chunk_size=4)
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    service = engine(structured_questions="auto")
    reply = await service.turns.ask(UserMessage("tg:1", "Which laptop?", on_text=on_text))

    assert reply.text.startswith("Tell me more.") and len(reply.text) <= MAX_ROUND_CHARS
    assert Notice.ANSWER_INCOMPLETE in reply.notices
    assert shown and not any("{" in text for text in shown)
    stored = await store.load_active("tg:1")
    assert stored is not None and [m.text for m in stored.messages[1:]] == [reply.text]
    assert len(model.requests) == 1


async def test_prose_then_a_round_in_json_shows_the_round_never_the_json(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """A reply that opens with words and then writes the round's JSON: while it streams
    only the words before the JSON are shown, and the reply is the round read from it."""
    round_text = '{"preamble": "Two facts.", "questions": [{"text": "Budget?", "options": []}]}'
    model.enqueue("Sure, here it is:\n" + round_text, chunk_size=3)
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    service = engine(structured_questions="auto")
    reply = await service.turns.ask(UserMessage("tg:1", "Which laptop?", on_text=on_text))

    assert reply.questions == ClarifyingRound("Two facts.", (Question("Budget?"),))
    assert not any('"' in text or "{" in text for text in shown)
    assert shown[-1] == "Two facts.\n\nBudget?"
    assert len(model.requests) == 1
