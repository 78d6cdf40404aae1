"""Bearer auth, `/healthz`, `/metrics` and the OpenAPI document checked against real responses."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from jsonschema import Draft202012Validator, ValidationError

from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi

TOKEN = "s3cr3t-token"


pytestmark = pytest.mark.api_settings(
    api_token=TOKEN,
    max_rounds_limit=5,
    api_max_body_bytes=4096,
    max_document_bytes=1000,
    max_image_bytes=1000,
)


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_api_requires_the_bearer_token(api: RunningApi) -> None:
    """Without the right token /api/* is 401 with WWW-Authenticate; with it, it works."""
    for headers in ({}, auth("wrong"), {"Authorization": f"Basic {TOKEN}"}):
        response = await api.client.post("/api/chat", json={"message": "hi"}, headers=headers)
        assert response.status == 401
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert (await response.json())["code"] == "UNAUTHORIZED"
    response = await api.client.post("/api/chat", json={"message": "hi"}, headers=auth())
    assert response.status == 200


async def test_health_and_metrics_stay_open(api: RunningApi) -> None:
    """Probes and scrapers need no token."""
    response = await api.client.get("/healthz")
    assert response.status == 200
    assert await response.json() == {
        "status": "ok",
        "store": True,
        "model": "test-model",
        "loops": {},
        "tools": [],
    }
    assert (await api.client.get("/metrics")).status == 200


async def test_health_is_503_when_the_store_is_gone(api: RunningApi) -> None:
    """A closed database makes the instance unready."""
    await api.store.close()
    response = await api.client.get("/healthz")
    assert response.status == 503
    assert await response.json() == {
        "status": "unavailable",
        "store": False,
        "model": "test-model",
        "loops": {},
        "tools": [],
    }


async def test_metrics_count_requests_rounds_tokens_and_errors(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """After a completed request and a failed one, the counters show both."""
    model_server.enqueue("Four.", usage={"prompt_tokens": 11, "completion_tokens": 3,
                                         "total_tokens": 14})  # fmt: skip
    await api.client.post("/api/chat", json={"message": "2+2?"}, headers=auth())
    model_server.enqueue(status=500)
    await api.client.post("/api/chat", json={"message": "3+3?"}, headers=auth())
    text = await (await api.client.get("/metrics")).text()
    expected = [
        'consult_http_requests_total{method="POST",route="/api/chat",status="200"} 1.0',
        'consult_http_requests_total{method="POST",route="/api/chat",status="503"} 1.0',
        'consult_rounds_answered_total{bot="0",final="true",source="api"} 1.0',
        'consult_consultations_completed_total{bot="0",source="api"} 1.0',
        'consult_model_request_duration_seconds_count{outcome="ok"} 1.0',
        'consult_model_errors_total{kind="unavailable"} 1.0',
        'consult_model_tokens_total{source="reported",type="prompt"} 11.0',
        'consult_model_tokens_total{source="reported",type="completion"} 3.0',
    ]
    for line in expected:
        assert line in text


def check(document: dict[str, Any], path: str, method: str, status: int, body: Any) -> None:
    """Validate one real response body against the document's schema for it."""
    schema = document["paths"][path][method]["responses"][str(status)]["content"][
        "application/json"]["schema"]  # fmt: skip
    Draft202012Validator({**schema, "components": document["components"]}).validate(body)


async def test_real_responses_match_the_openapi_document(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Success, every reachable error code and both health answers validate against the spec."""
    response = await api.client.get("/api/openapi.json", headers=auth())
    document = await response.json()
    assert document["openapi"].startswith("3.1")
    for schema in document["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)
    seen: list[tuple[int, Any]] = []

    async def chat(body: Any, *, headers: dict[str, str] | None = None) -> dict[str, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        reply = await api.client.post("/api/chat", data=data, headers=headers or auth())
        seen.append((reply.status, payload := await reply.json()))
        return payload

    ok = await chat({"message": "Hi", "maxRounds": 2})
    Draft202012Validator(
        {"$ref": "#/components/schemas/ChatRequest", "components": document["components"]}
    ).validate({"message": "Hi", "maxRounds": 2, "sessionId": ok["sessionId"]})
    await chat({"message": "Hi", "maxRounds": 0})
    await chat({"message": "Hi", "maxRounds": 6})
    await chat({"message": " "})
    await chat(b"{oops")
    await chat({"message": "Hi", "sessionId": str(uuid.uuid4())})
    await chat({"message": "x" * 6000})  # over 4096 + one 1000-byte file in base64
    await chat({"message": "Hi"}, headers=auth("nope"))
    for status in (400, 500):
        model_server.enqueue(status=status)
        await chat({"message": "Hi", "sessionId": ok["sessionId"]})
    model_server.enqueue("slow", hold=asyncio.Event())  # held forever: a timeout
    with api.first_text_deadline(0.05):
        await chat({"message": "Hi", "sessionId": ok["sessionId"]})
    last = await chat({"message": "Hi", "sessionId": ok["sessionId"]})
    await chat({"message": "More", "sessionId": last["sessionId"]})

    codes = {body.get("code", "OK") for _, body in seen}
    assert codes == {
        "OK", "INVALID_MAX_ROUNDS", "MAX_ROUNDS_EXCEEDED", "VALIDATION_ERROR",
        "SESSION_NOT_FOUND", "PAYLOAD_TOO_LARGE", "UNAUTHORIZED", "MODEL_ERROR",
        "MODEL_UNAVAILABLE", "MODEL_TIMEOUT", "DIALOG_COMPLETED",
    }  # fmt: skip
    for status, body in seen:
        check(document, "/api/chat", "post", status, body)

    health = await api.client.get("/healthz")
    check(document, "/healthz", "get", 200, await health.json())
    await api.store.close()
    health = await api.client.get("/healthz")
    check(document, "/healthz", "get", 503, await health.json())


def request_validator(document: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(
        {"$ref": "#/components/schemas/ChatRequest", "components": document["components"]}
    )


async def test_the_document_and_the_parser_agree_on_every_body(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A body the document declares valid is accepted; one it declares invalid is refused."""
    document = await (await api.client.get("/api/openapi.json", headers=auth())).json()
    validator = request_validator(document)
    bodies: list[dict[str, Any]] = [
        {"message": "Hi", "maxRounds": 1.0}, {"message": "Hi", "maxRounds": 2.0},
        {"message": "Hi", "maxRounds": 2.5}, {"message": "Hi", "maxRounds": "2"},
        {"message": "Hi", "maxRounds": True}, {"message": "Hi", "maxRounds": 0},
        {"message": "Hi", "maxRounds": 5}, {"message": "Hi", "maxRounds": 6},
        {"message": "Hi", "maxTokens": 64.0}, {"message": "Hi", "maxTokens": 0},
        {"message": "Hi", "maxTokens": 8192}, {"message": "Hi", "maxTokens": 8193},
        {"message": "Hi", "model": "test-model"}, {"message": "Hi", "model": "other"},
        {"message": " \n"}, {"message": "x" * 4000}, {"message": "x" * 4001},
        {"message": "Hi", "disableSearch": 1}, {"message": "Hi", "outputFormat": "json"},
        {"message": "Hi", "sessionId": "nope"}, {"message": "Hi", "systemPrompt": None},
    ]  # fmt: skip
    for body in bodies:
        response = await api.client.post("/api/chat", json=body, headers=auth())
        declared_valid = validator.is_valid(body)
        assert (response.status == 200) is declared_valid, (body, await response.json())


def as_item(media: dict[str, Any], document: dict[str, Any], event: str, data: str) -> None:
    """Validate one received event against the stream's schema: a Server-Sent Event object
    (`event`, `data`), whose `data` is JSON text following the event's own schema."""
    schema = media["schema"]
    assert schema["type"] == "object"  # one event, not the stream as a plain string
    Draft202012Validator({**schema, "components": document["components"]}).validate(
        {"event": event, "data": data}
    )
    (branch,) = [b for b in schema["oneOf"] if b["properties"]["event"]["const"] == event]
    text = branch["properties"]["data"]
    assert text["contentMediaType"] == "application/json"
    content = {**text["contentSchema"], "components": document["components"]}
    Draft202012Validator(content).validate(json.loads(data))


async def test_the_stream_and_session_endpoints_are_documented_and_match(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The SSE response lists its events with a schema each; real events and sessions match."""
    document = await (await api.client.get("/api/openapi.json", headers=auth())).json()
    stream_ok = document["paths"]["/api/chat/stream"]["post"]["responses"]["200"]
    media = stream_ok["content"]["text/event-stream"]
    events = media["x-sse-events"]
    assert set(events) == {"session", "delta", "snapshot", "tool", "done", "error"}
    for path in ("/api/chat", "/api/chat/stream"):
        operation = document["paths"][path]["post"]
        assert [(p["name"], p["in"]) for p in operation["parameters"]] == [
            ("Idempotency-Key", "header")]  # fmt: skip
        assert "Idempotent-Replayed" in operation["responses"]["200"]["headers"]
        assert "Retry-After" in operation["responses"]["429"]["headers"]

    def valid(event: str, data: Any) -> None:
        Draft202012Validator({**events[event], "components": document["components"]}).validate(data)

    from openai._streaming import SSEDecoder

    model_server.enqueue("Streamed reply with several chunks", chunk_size=5)
    response = await api.client.post(
        "/api/chat/stream", json={"message": "Hi", "maxRounds": 2}, headers=auth()
    )
    seen = [e async for e in SSEDecoder().aiter_bytes(response.content.iter_any())]
    for event in seen:
        assert event.event is not None
        valid(event.event, event.json())
        as_item(media, document, event.event, event.data)
    with pytest.raises(ValidationError):
        as_item(media, document, "bogus", "{}")
    with pytest.raises(ValidationError):
        as_item(media, document, "delta", '{"sessionId": 3}')
    model_server.enqueue(status=500)
    session = seen[-1].json()["sessionId"]
    response = await api.client.post(
        "/api/chat/stream", json={"message": "More", "sessionId": session}, headers=auth()
    )
    failed = [e async for e in SSEDecoder().aiter_bytes(response.content.iter_any())]
    assert failed[-1].event == "error"
    valid("error", failed[-1].json())

    view = await api.client.get(f"/api/sessions/{session}", headers=auth())
    check(document, "/api/sessions/{sessionId}", "get", 200, await view.json())
    missing = await api.client.get(f"/api/sessions/{uuid.uuid4()}", headers=auth())
    check(document, "/api/sessions/{sessionId}", "get", 404, await missing.json())
    reused = await api.client.post(
        "/api/chat", json={"message": "Other"}, headers={**auth(), "Idempotency-Key": "k1"}
    )
    reused = await api.client.post(
        "/api/chat", json={"message": "Another"}, headers={**auth(), "Idempotency-Key": "k1"}
    )
    check(document, "/api/chat", "post", 422, await reused.json())
