"""`knowledgeSources`: the knowledge-base passages an answer cites, in the HTTP API's
replies (plain and streamed), a follow-up's answer, `GET /api/sessions/{id}` after a
restart and the export; over a real server, the real openai SDK (fake model), real SQLite
and a listed knowledge search, checked against the OpenAPI document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi, api_settings, running_api
from tests.knowledge_search import ListedKnowledge, passage

KNOWLEDGE = ListedKnowledge(
    [
        passage(
            1,
            "Kettles carry a two-year warranty.",
            title="Warranty terms",
            section="Kettles",
            page=3,
            document_id=12,
        ),
        passage(2, "Descale the kettle monthly.", title="Care guide", document_id=13),
    ]
)
WARRANTY = {
    "ref": "K1",
    "documentId": 12,
    "title": "Warranty terms",
    "section": "Kettles",
    "page": 3,
    "snippet": "Kettles carry a two-year warranty.",
}
CARE = {
    "ref": "K2",
    "documentId": 13,
    "title": "Care guide",
    "section": "",
    "page": None,
    "snippet": "Descale the kettle monthly.",
}


async def post(api: RunningApi, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.client.post("/api/chat", json=body)
    assert response.status == 200, await response.text()
    result: dict[str, Any] = await response.json()
    return result


async def chat_response_valid(api: RunningApi, body: dict[str, Any]) -> None:
    document = await (await api.client.get("/api/openapi.json")).json()
    schema = {"$ref": "#/components/schemas/ChatResponse", "components": document["components"]}
    Draft202012Validator(schema).validate(body)


async def test_an_answer_carries_the_passages_it_cites(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """The question round lists none; the final answer lists K1 (cited) but not K2 (given,
    not cited) nor K7 (no such passage), every field as the document describes it; a
    follow-up's answer lists its own; the streamed `done` event carries them too."""
    settings = api_settings(tmp_path / "api.sqlite3", model_server.base_url)
    async with running_api(settings, knowledge=KNOWLEDGE) as api:
        model_server.enqueue("Which model is your kettle?")
        first = await post(api, {"message": "Is my kettle under warranty?", "maxRounds": 2})
        session = first["sessionId"]
        model_server.enqueue("Yes, for two years [K1] [K7].")
        final = await post(api, {"message": "Aqua 2000", "sessionId": session})
        model_server.enqueue("Descale it monthly [K2] and keep the receipt [K1].")
        follow_up = await post(
            api, {"message": "How do I keep it working?", "sessionId": session, "followUp": True}
        )
        await chat_response_valid(api, final)
        await chat_response_valid(api, follow_up)
        model_server.enqueue("Two years [K1].")
        response = await api.client.post(
            "/api/chat/stream", json={"message": "Kettle warranty?", "maxRounds": 1}
        )
        done = done_event(await response.text())
    assert "knowledgeSources" not in first
    assert final["knowledgeSources"] == [WARRANTY]
    assert follow_up["knowledgeSources"] == [WARRANTY, CARE]
    assert done["knowledgeSources"] == [WARRANTY]


def done_event(text: str) -> dict[str, Any]:
    event, done = None, None
    for line in text.splitlines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: ") and event == "done":
            done = json.loads(line.removeprefix("data: "))
    assert done is not None
    return done


async def test_a_session_read_back_and_exported_after_a_restart_lists_them(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """The sources are stored with the answer: a new runtime on the same file gives them
    in the session's messages and lists them under the answer in the export."""
    settings = api_settings(tmp_path / "api.sqlite3", model_server.base_url)
    async with running_api(settings, knowledge=KNOWLEDGE) as api:
        model_server.enqueue("Two years [K1].")
        final = await post(api, {"message": "Kettle warranty?", "maxRounds": 1})
    async with running_api(settings) as restarted:
        session = await restarted.client.get(f"/api/sessions/{final['sessionId']}")
        view = await session.json()
        export = await restarted.client.get(f"/api/sessions/{final['sessionId']}/export?format=md")
        markdown = await export.text()
    user, answer = view["messages"]
    assert "knowledgeSources" not in user
    assert answer["knowledgeSources"] == [WARRANTY]
    assert (
        "Two years [K1].\n\n**Sources from the knowledge base**\n\n"
        "- \\[K1\\] Warranty terms › Kettles, page 3\n"
    ) in markdown


async def test_the_openapi_document_describes_the_field(api: RunningApi) -> None:
    """ChatResponse and a session's messages have an optional `knowledgeSources`, whose
    items have all six fields."""
    document = await (await api.client.get("/api/openapi.json")).json()
    schemas = document["components"]["schemas"]
    for owner in ("ChatResponse", "SessionMessage"):
        field = schemas[owner]["properties"]["knowledgeSources"]
        assert "knowledgeSources" not in schemas[owner]["required"]
        item = field["items"]["$ref"].rsplit("/", 1)[-1]
    fields = {"ref", "documentId", "title", "section", "page", "snippet"}
    assert set(schemas[item]["properties"]) == fields == set(schemas[item]["required"])
