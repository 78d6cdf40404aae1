"""The OpenAPI 3.1 document, generated from the same pydantic models that validate requests.

Invariant: the document cannot drift from the code — bodies come from `api.schemas`,
error codes and statuses from `api.errors.STATUS` — and a test validates real
responses against it.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from api.errors import STATUS
from api.schemas import ChatRequest, ChatResponse, ErrorResponse, HealthResponse

_REF = "#/components/schemas/{model}"

_CHAT_ERRORS = {
    400: "VALIDATION_ERROR, INVALID_MAX_ROUNDS, MAX_ROUNDS_EXCEEDED, DIALOG_COMPLETED",
    401: "UNAUTHORIZED (only when an API token is configured)",
    404: "SESSION_NOT_FOUND",
    413: "PAYLOAD_TOO_LARGE",
    502: "MODEL_ERROR: the model rejected the request (round not consumed)",
    503: "MODEL_UNAVAILABLE: unavailable or rate limited (round not consumed; retry)",
    504: "MODEL_TIMEOUT (round not consumed; retry)",
}

_STREAM_DESCRIPTION = """Server-Sent Events (`text/event-stream`). Events:
`delta` `{"content": "<new text>"}` (append it), rarely `snapshot` `{"content": "<whole text>"}`
(replace what you have), then exactly one of `done` (the same object as `/api/chat` returns)
or `error` (an error object plus `status`). Comment lines (`: keep-alive`) may appear."""


def _schemas() -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    model: type[BaseModel]
    for model in (ChatRequest, ChatResponse, ErrorResponse, HealthResponse):
        schema = model.model_json_schema(ref_template=_REF)
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    return schemas


def _json(ref: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}},
    }


def _errors() -> dict[str, Any]:
    return {str(status): _json("ErrorResponse", codes) for status, codes in _CHAT_ERRORS.items()}


def build_openapi(*, max_rounds_limit: int, with_token: bool) -> dict[str, Any]:
    """The document for this deployment (its round ceiling and whether a token is needed)."""
    schemas = copy.deepcopy(_schemas())
    rounds = schemas["ChatRequest"]["properties"]["maxRounds"]["anyOf"][0]
    rounds["maximum"] = max_rounds_limit
    body = {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ChatRequest"}}},
    }
    chat = {
        "summary": "Answer one round of a consultation",
        "requestBody": body,
        "responses": {"200": _json("ChatResponse", "The round's reply"), **_errors()},
    }
    stream_ok = {
        "description": _STREAM_DESCRIPTION,
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
    stream = {
        "summary": "Answer one round, streamed as Server-Sent Events",
        "requestBody": body,
        "responses": {"200": stream_ok, **_errors()},
    }
    health = {
        "summary": "Liveness and readiness (store reachable, model configured)",
        "security": [],
        "responses": {
            "200": _json("HealthResponse", "Healthy"),
            "503": _json("HealthResponse", "Not ready"),
        },
    }
    metrics = {
        "summary": "Prometheus metrics",
        "security": [],
        "responses": {"200": {"description": "Prometheus text exposition format",
                              "content": {"text/plain": {"schema": {"type": "string"}}}}},
    }  # fmt: skip
    spec = {
        "description": "The OpenAPI document",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "Consultation bot API",
            "version": "1.0.0",
            "description": "Bounded multi-round expert consultations (seed 003). Error codes: "
            + ", ".join(f"{code} ({status})" for code, status in STATUS.items()),
        },
        "paths": {
            "/api/chat": {"post": {**chat, "operationId": "chat"}},
            "/api/chat/stream": {"post": {**stream, "operationId": "chatStream"}},
            "/api/openapi.json": {
                "get": {
                    "summary": "This document",
                    "operationId": "openapi",
                    "responses": {"200": spec, "401": _errors()["401"]},
                }
            },
            "/healthz": {"get": {**health, "operationId": "health"}},
            "/metrics": {"get": {**metrics, "operationId": "metrics"}},
        },
        "components": {"schemas": schemas},
    }
    if with_token:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document
