"""`outputSchema` end to end: sent to the model as `response_format: json_schema` where the
server takes it, and the final JSON checked against it (`schemaValid`). Real server, real
openai SDK against the fake model server, real SQLite."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi

SCHEMA = {
    "type": "object",
    "properties": {"plan": {"type": "array", "items": {"type": "string"}}},
    "required": ["plan"],
}


async def ask(api: RunningApi, **fields: Any) -> dict[str, Any]:
    body = {"message": "A plan, please", "outputFormat": "json", **fields}
    response = await api.client.post("/api/chat", json=body)
    assert response.status == 200, await response.text()
    return await response.json()  # type: ignore[no-any-return]


async def test_the_schema_is_sent_as_json_schema_and_a_fitting_answer_is_valid(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The model is asked for the schema itself; an answer that fits says schemaValid: true."""
    model_server.enqueue('{"plan": ["squats", "rows"]}')

    body = await ask(api, outputSchema=SCHEMA)

    assert body["schemaValid"] is True
    assert model_server.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA, "strict": False},
    }


@pytest.mark.parametrize(
    ("answer", "schema"),
    [('{"plan": "squats"}', json.dumps(SCHEMA)), ("Sorry, no plan today.", SCHEMA)],
    ids=["wrong type, schema as text", "no JSON at all"],
)
async def test_an_answer_that_breaks_the_schema_says_so(
    api: RunningApi, model_server: FakeModelServer, answer: str, schema: Any
) -> None:
    """An answer that does not follow the schema (JSON of the wrong shape, or no JSON at all)
    is delivered as it is, with schemaValid: false."""
    model_server.enqueue(answer)

    body = await ask(api, outputSchema=schema)

    assert body["schemaValid"] is False
    assert body["content"] == answer


async def test_a_server_without_json_schema_gets_json_object_once(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A server refusing json_schema (400 about response_format) is asked again with
    json_object, and the next session goes straight to json_object."""
    model_server.enqueue("response_format: json_schema is not supported", status=400)
    model_server.enqueue('{"plan": ["squats"]}')
    model_server.enqueue('{"plan": ["rows"]}')

    first = await ask(api, outputSchema=SCHEMA)
    second = await ask(api, outputSchema=SCHEMA)

    assert first["schemaValid"] is True and second["schemaValid"] is True
    formats = [r["response_format"]["type"] for r in model_server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]


async def test_a_schema_in_words_stays_in_the_prompt(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """An outputSchema that is not a JSON object (a description in words) is shown in the
    prompt only: json_object, and no schemaValid."""
    model_server.enqueue('{"plan": ["squats"]}')

    body = await ask(api, outputSchema="an object with a list of exercises")

    assert "schemaValid" not in body
    assert model_server.requests[0]["response_format"] == {"type": "json_object"}
    assert "list of exercises" in model_server.requests[0]["messages"][0]["content"]


async def test_without_a_schema_there_is_no_schema_valid(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Plain JSON mode (and text mode) answers carry no schemaValid field."""
    model_server.enqueue('{"plan": ["squats"]}')

    body = await ask(api)

    assert "schemaValid" not in body
