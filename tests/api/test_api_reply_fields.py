"""The reply fields beyond the seed's six: `truncated` and `citations`, over a real server,
the real openai SDK (fake model) and real SQLite, checked against the OpenAPI document."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi

SEED_FIELDS = {"content", "model", "isComplete", "round", "maxRounds", "sessionId"}
ALWAYS_FIELDS = SEED_FIELDS | {"questions", "readyForFinal"}
CITATIONS = ["https://www.who.int/sleep", "https://example.org/a?b=1", "ftp://files.example/x"]
SEARCH_RESULTS = [
    {"title": "Sleep — WHO", "url": "https://www.who.int/sleep", "date": "2024-05-01"},
    {"title": "  Example\n  page  ", "url": "https://example.org/a?b=1"},
]


pytestmark = pytest.mark.api_settings(max_continuations=2)


async def post(api: RunningApi, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.client.post("/api/chat", json=body)
    assert response.status == 200, await response.text()
    result: dict[str, Any] = await response.json()
    return result


async def stream_done(api: RunningApi, body: dict[str, Any]) -> dict[str, Any]:
    """The `done` event's data of a streamed round."""
    response = await api.client.post("/api/chat/stream", json=body)
    assert response.status == 200
    event, done = None, None
    for line in (await response.text()).splitlines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: ") and event == "done":
            done = json.loads(line.removeprefix("data: "))
    assert done is not None
    return done


async def test_an_answer_cut_off_on_every_call_is_marked_truncated(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Every call ends with "length" (the first and both continuations): the consultation is
    complete, but the reply says it was cut off."""
    for piece in ("The plan: first dig", " the beds, then water", " them, and then"):
        model_server.enqueue(piece, finish_reason="length")
    body = await post(api, {"message": "Plan my garden"})
    assert len(model_server.requests) == 3
    assert body["isComplete"] is True
    assert body["truncated"] is True
    assert body["content"].startswith("The plan: first dig the beds")


async def test_a_stream_cut_without_finish_reason_is_truncated_in_the_done_event(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A stream that just ends (no finish_reason) on every call: `done` says truncated."""
    for piece in ("Step one: measure", " the room, then", " buy the paint"):
        model_server.enqueue(piece, stop_early=True)
    done = await stream_done(api, {"message": "How do I paint a room?"})
    assert done["isComplete"] is True and done["truncated"] is True


async def test_a_whole_answer_has_only_the_seed_fields(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """An answer that ended normally, from a provider without sources: the six seed fields,
    plus the structured round's two, empty (it asked nothing, and not of its own accord)."""
    model_server.enqueue("Water twice a week.")
    body = await post(api, {"message": "How often to water tomatoes?"})
    assert set(body) == ALWAYS_FIELDS
    assert body["questions"] == [] and body["readyForFinal"] is False


async def test_perplexity_sources_become_citations(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """`citations` and `search_results` of the stream chunks: numbered as the answer cites
    them, titled from the search results, every URL kept as sent (the client decides)."""
    text = "Adults need 7-9 hours [1]. See also [2] and [3]."
    extras = {"citations": CITATIONS, "search_results": SEARCH_RESULTS}
    model_server.enqueue(text, extras=extras)
    body = await post(api, {"message": "How much sleep?", "model": "test-model"})
    assert body["content"] == text
    assert body["citations"] == [
        {"index": 1, "url": "https://www.who.int/sleep", "title": "Sleep — WHO"},
        {"index": 2, "url": "https://example.org/a?b=1", "title": "Example page"},
        {"index": 3, "url": "ftp://files.example/x"},
    ]
    model_server.enqueue(text, extras=extras)
    done = await stream_done(api, {"message": "How much sleep?"})
    assert done["citations"] == body["citations"]


async def test_search_results_alone_and_malformed_extras(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Only `search_results` (no `citations`): they are the sources. Malformed entries are
    skipped, never an error."""
    results = [{"title": "A", "url": "https://a.example"}, "junk", {"url": 5}, {"title": "no url"}]
    model_server.enqueue("Answer [1].", extras={"search_results": results})
    body = await post(api, {"message": "Q?"})
    assert body["citations"] == [{"index": 1, "url": "https://a.example", "title": "A"}]
    model_server.enqueue("Answer.", extras={"citations": "not a list", "search_results": {}})
    body = await post(api, {"message": "Q?"})
    assert "citations" not in body


async def test_the_openapi_document_describes_both_fields(api: RunningApi) -> None:
    """The document's ChatResponse has optional `truncated` and `citations`."""
    response = await api.client.get("/api/openapi.json")
    document = await response.json()
    schemas = document["components"]["schemas"]
    chat = schemas["ChatResponse"]
    assert chat["properties"]["truncated"]["type"] == "boolean"
    assert "truncated" not in chat["required"] and "citations" not in chat["required"]
    item = chat["properties"]["citations"]["items"]["$ref"].rsplit("/", 1)[-1]
    assert set(schemas[item]["properties"]) == {"index", "url", "title"}
    assert set(schemas[item]["required"]) == {"index", "url"}
