"""The OpenAPI 3.1 document, generated from the same pydantic models that validate requests.

Invariant: the document cannot drift from the code — bodies come from `api.schemas`,
error codes and statuses from `api.errors.STATUS`, this deployment's limits (rounds,
input size, models, token budget) from its settings — and tests validate real requests
and responses against it: a body the document calls valid is accepted, and the
reverse. The stream's response schema is one Server-Sent Event (`event` and JSON `data`,
each event name with its data's schema), the form OpenAPI 3.2 gives `itemSchema` and
tools for 3.1 read from `schema`; `x-sse-events` lists the same (event name → schema of
its JSON `data`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from api.attachments import MAX_ATTACHMENTS, chat_body_limit, largest_file
from api.config import ApiConfig
from api.errors import STATUS
from api.idempotency import HEADER, MAX_KEY_LENGTH
from api.openai_compat.openapi import openai_paths, openai_schemas
from api.schemas import (
    BOT_REF_PATTERN,
    MAX_USER_ID_CHARS,
    USER_ID_PATTERN,
    AnswerIn,
    AttachmentIn,
    ChatRequest,
    ChatResponse,
    Citation,
    ErrorResponse,
    HealthResponse,
    KnowledgeSourceOut,
    MemoryView,
    QuestionOut,
    SessionView,
    StreamError,
    StreamSession,
    StreamText,
    StreamTool,
    ToolCallOut,
    ToolServerOut,
)
from api.stats import StatsResponse
from core.domain.stats import MAX_DAYS
from core.domain.telegram_keys import MAX_SCOPE
from media.intake import Intake

_REF = "#/components/schemas/{model}"
_BOT = {
    "name": "bot",
    "in": "query",
    "required": False,
    "description": "The bot whose session or user this is, as the request that made it "
    "named it (`bot`): a stored bot's id or `@username`; without it (or 0) the deployment's "
    "own bot. Another bot's session is 404 SESSION_NOT_FOUND, a bot not stored, removed or "
    "disabled 404 BOT_NOT_FOUND.",
    "schema": {"type": "string", "pattern": BOT_REF_PATTERN},
}

_CHAT_ERRORS = {
    400: "VALIDATION_ERROR, INVALID_MAX_ROUNDS, MAX_ROUNDS_EXCEEDED, DIALOG_COMPLETED",
    401: "UNAUTHORIZED (only when an API token is configured)",
    404: "SESSION_NOT_FOUND, or FACT_NOT_FOUND (a user's fact to delete), or BOT_NOT_FOUND "
    "(`bot` names no enabled bot; nothing was read or stored)",
    409: "CONFLICT: another request answered this round meanwhile (read the session), or "
    f"the request with this {HEADER} is still being answered (retry later); or "
    "ANSWER_STALE: `answers` were sent but the session's last reply asked no `questions` "
    "to answer (a final answer, or questions asked as plain text): send a `message`; or "
    "FOLLOW_UP_UNAVAILABLE: a `followUp` the session cannot take (`reason`: not_complete, "
    "expired, limit_reached, disabled); nothing was stored",
    413: "PAYLOAD_TOO_LARGE, or CONTEXT_TOO_LONG: the session's conversation is over the "
    "model's context; start a new session and ask more briefly (the error names the session)",
    422: f"IDEMPOTENCY_KEY_REUSED: this {HEADER} was used for a different request, or "
    "ATTACHMENT_REFUSED: a file was not taken (`problem` says why, `name` which file, "
    "`limit` the byte limit it is over); nothing was stored and no round was used; or "
    "ANSWER_INVALID: an answer names a question or option the last reply does not have",
    429: "RATE_LIMITED: too many requests from this client; see Retry-After; or, on the chat "
    "endpoints, QUOTA_EXCEEDED: this bearer token's daily tokens (API_DAILY_TOKEN_LIMIT) or "
    "the `userId`'s person limits are used up (`quota` names the limit, `resetsAt` when it "
    "resets, Retry-After the seconds until then); nothing was stored and no round was used. "
    "A session under way is not refused: its next round is its final answer "
    "(`quotaReached`)",
    500: "INTERNAL_ERROR (round not consumed; the error names the session to retry)",
    502: "MODEL_ERROR: the model rejected the request, or MODEL_MISCONFIGURED: the service's "
    "model key, base URL or model name is wrong, which the operator must fix (round not "
    "consumed)",
    503: "MODEL_UNAVAILABLE or STORE_UNAVAILABLE (round not consumed; retry), or "
    "SERVER_BUSY: too many large bodies are being handled; nothing was read or stored, "
    "retry after Retry-After seconds",
    504: "MODEL_TIMEOUT (round not consumed; retry)",
}

_STREAM_DESCRIPTION = """Server-Sent Events (`text/event-stream`). Events, each with JSON `data`:
`session` `{"sessionId": "…"}` first (resume or retry with it), then `delta`
`{"content": "<new text>"}` (append it), rarely `snapshot` `{"content": "<whole text>"}`
(replace what you have), then exactly one of `done` (the same object as `/api/chat` returns)
or `error` (an error object plus `status`). Comment lines (`: keep-alive`) may appear.
A replayed request (same `Idempotency-Key`) sends only `session` and `done`."""

_IDEMPOTENCY = {
    "name": HEADER,
    "in": "header",
    "required": False,
    "description": "Makes the request safe to retry: the same key (from the same client) "
    "returns the stored reply instead of taking a new round; while the first request runs, "
    "a retry waits for its result (on any worker; after 5 minutes, 409 CONFLICT: retry later); "
    "a request that failed leaves the key usable. The same key with a different body is "
    "refused (422 IDEMPOTENCY_KEY_REUSED).",
    "schema": {"type": "string", "pattern": f"^[\\x21-\\x7e]{{1,{MAX_KEY_LENGTH}}}$"},
}

_LANGUAGE_TAG = "^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*$"
"""A language's code or tag, as `language` takes it (`es`, `pt_BR`, `zh-Hans`, `de-AT`)."""

_MODELS: tuple[type[BaseModel], ...] = (
    AnswerIn,
    AttachmentIn,
    ChatRequest,
    ChatResponse,
    Citation,
    ErrorResponse,
    HealthResponse,
    KnowledgeSourceOut,
    MemoryView,
    QuestionOut,
    SessionView,
    ToolCallOut,
    StreamSession,
    StreamText,
    StreamTool,
    StreamError,
    StatsResponse,
    ToolServerOut,
)


def _schemas() -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for model in _MODELS:
        schema = model.model_json_schema(ref_template=_REF)
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    return schemas


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(ref: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(ref)}}}


_REPLAYED = {
    "Idempotent-Replayed": {
        "description": "`true` when this is the answer of an earlier request with the same "
        f"{HEADER} (stored, or still running when this one arrived); no new round was taken.",
        "schema": {"type": "string", "enum": ["true"]},
    }
}
_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds until this client may send again.",
        "schema": {"type": "integer", "minimum": 1},
    }
}


def _errors(*statuses: int) -> dict[str, Any]:
    chosen = statuses or tuple(_CHAT_ERRORS)
    errors = {str(status): _json("ErrorResponse", _CHAT_ERRORS[status]) for status in chosen}
    if "429" in errors:
        errors["429"]["headers"] = _RETRY_AFTER
    return errors


def _limit(schemas: dict[str, Any], config: ApiConfig) -> None:
    """Write this deployment's limits into the request schema."""
    properties = schemas["ChatRequest"]["properties"]
    properties["maxRounds"]["anyOf"][0]["maximum"] = config.max_rounds_limit
    properties["maxTokens"]["anyOf"][0]["maximum"] = config.max_tokens_limit
    properties["message"]["maxLength"] = config.max_input_chars
    schemas["AnswerIn"]["properties"]["text"]["anyOf"][0]["maxLength"] = config.max_input_chars
    properties["systemPrompt"]["anyOf"][0]["maxLength"] = config.max_input_chars
    properties["outputSchema"]["anyOf"][0]["maxLength"] = config.max_input_chars
    model = properties["model"]["anyOf"][0]
    model["enum"] = sorted(config.models)
    model.pop("minLength", None)
    model.pop("maxLength", None)


def _files(schemas: dict[str, Any], config: ApiConfig, intake: Intake | None) -> str:
    """Write what files this deployment takes into the request schema; return the body
    limit's description."""
    attachments = schemas["ChatRequest"]["properties"]["attachments"]
    if intake is None:
        attachments["maxItems"] = 0
        attachments["description"] = "This deployment takes no attachments."
        return f"At most {config.max_body_bytes} bytes (API_MAX_BODY_BYTES)."
    limits = intake.config
    kinds = [f"documents up to {limits.max_document_bytes} bytes (MAX_DOCUMENT_BYTES)"]
    kinds.append(
        f"voice notes up to {limits.max_voice_bytes} bytes (MAX_VOICE_BYTES)"
        if limits.voice
        else "no voice notes (no transcription model is configured)"
    )
    kinds.append(
        f"photos up to {limits.max_image_bytes} bytes (MAX_IMAGE_BYTES)"
        if limits.vision
        else "no photos (the model is not set up to see images: LLM_VISION)"
    )
    attachments["description"] += (
        " This deployment takes " + "; ".join(kinds) + f". The documents of one request "
        f"share {limits.max_document_chars} characters of text (MAX_DOCUMENT_CHARS); a "
        "longer text is cut and `attachmentsCut` says by how much."
    )
    attachments["maxItems"] = MAX_ATTACHMENTS
    return (
        f"At most {chat_body_limit(config.max_body_bytes, intake)} bytes: API_MAX_BODY_BYTES "
        f"({config.max_body_bytes}) plus the base64 size of the largest file taken "
        f"({largest_file(limits)} bytes). Other routes keep API_MAX_BODY_BYTES."
    )


def _sse_event(events: dict[str, Any]) -> dict[str, Any]:
    """One event of the stream, as OpenAPI 3.2's `itemSchema` models a Server-Sent Event:
    an object with its `event` name and its `data` (here JSON text, `contentSchema` naming
    the event's own schema). Tools for OpenAPI 3.0/3.1 read `schema` of `text/event-stream`
    this way too (Schemathesis, for one)."""
    return {
        "type": "object",
        "description": "One Server-Sent Event; the stream is a sequence of these.",
        "required": ["event", "data"],
        "properties": {"event": {"type": "string"}, "data": {"type": "string"}},
        "oneOf": [
            {
                "properties": {
                    "event": {"const": name},
                    "data": {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": schema,
                    },
                }
            }
            for name, schema in events.items()
        ],
    }


def build_openapi(
    config: ApiConfig,
    *,
    with_token: bool,
    intake: Intake | None = None,
    languages: tuple[str, ...] = ("en",),
    openai_models: Sequence[str] = (),
) -> dict[str, Any]:
    """The document for this deployment (its limits, the files it takes, the languages an
    export is labelled in, the model ids of the OpenAI-compatible endpoint and whether a
    token is needed)."""
    schemas = copy.deepcopy(_schemas())
    _limit(schemas, config)
    schemas.update(openai_schemas(openai_models, config.max_rounds_limit))
    body = {
        "required": True,
        "description": _files(schemas, config, intake),
        "content": {"application/json": {"schema": _ref("ChatRequest")}},
    }
    chat = {
        "summary": "Answer one round of a consultation",
        "parameters": [_IDEMPOTENCY],
        "requestBody": body,
        "responses": {
            "200": {**_json("ChatResponse", "The round's reply"), "headers": _REPLAYED},
            **_errors(),
        },
    }
    events = {
        "session": _ref("StreamSession"),
        "delta": _ref("StreamText"),
        "snapshot": _ref("StreamText"),
        "tool": _ref("StreamTool"),
        "done": _ref("ChatResponse"),
        "error": _ref("StreamError"),
    }
    stream_ok = {
        "description": _STREAM_DESCRIPTION,
        "headers": _REPLAYED,
        "content": {"text/event-stream": {"schema": _sse_event(events), "x-sse-events": events}},
    }
    stream = {
        "summary": "Answer one round, streamed as Server-Sent Events",
        "parameters": [_IDEMPOTENCY],
        "requestBody": body,
        "responses": {"200": stream_ok, **_errors()},
    }
    session = {
        "summary": "Read a session back: status, round, limit and its messages, each reply "
        "with its questions and readyForFinal",
        "parameters": [
            {"name": "sessionId", "in": "path", "required": True,
             "schema": {"type": "string", "format": "uuid"}},
            _BOT,
        ],
        "responses": {
            "200": _json("SessionView", "The session"),
            **_errors(401, 404, 429),
        },
    }  # fmt: skip
    export = {
        "summary": "A session as a file to keep: request, clarifying rounds, final answer",
        "parameters": [
            {"name": "sessionId", "in": "path", "required": True,
             "schema": {"type": "string", "format": "uuid"}},
            _BOT,
            {"name": "format", "in": "query", "required": False,
             "schema": {"type": "string", "enum": ["docx", "md"], "default": "docx"}},
            {"name": "language", "in": "query", "required": False,
             "description": "The language of the document's labels (headings, date), one of "
             f"{', '.join(languages)}, as its code or a language tag (`pt-BR`, `pt`, "
             "`zh-CN`); another is 400 VALIDATION_ERROR. Without it, the first language of "
             "Accept-Language that is one of them, else the language the session's user "
             "writes in, else English.",
             "schema": {"type": "string", "pattern": _LANGUAGE_TAG,
                        "examples": list(languages)}},
            {"name": "Accept-Language", "in": "header", "required": False,
             "description": "Languages for the labels when `language` is not given, by "
             "weight (`q`); those not offered are passed over.",
             "schema": {"type": "string"}},
        ],
        "responses": {
            "200": {
                "description": "The transcript as an attachment (Content-Disposition)",
                "headers": {
                    "Content-Language": {
                        "description": "The language of the labels, as a tag (`pt-BR`).",
                        "schema": {"type": "string"},
                    }
                },
                "content": {
                    "application/vnd.openxmlformats-officedocument.wordprocessingml.document":
                        {"schema": {"type": "string", "format": "binary"}},
                    "text/markdown": {"schema": {"type": "string"}},
                },
            },
            **_errors(400, 401, 404, 429),
        },
    }  # fmt: skip
    forget = {
        "summary": "Forget a session: its messages, idempotency keys and all kept with it",
        "parameters": [
            {"name": "sessionId", "in": "path", "required": True,
             "schema": {"type": "string", "format": "uuid"}},
            _BOT,
        ],
        "responses": {"204": {"description": "Deleted"}, **_errors(401, 404, 429)},
    }  # fmt: skip
    user = {
        "name": "userId",
        "in": "path",
        "required": True,
        "schema": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_USER_ID_CHARS,
            "pattern": USER_ID_PATTERN,
        },
    }
    memory = {
        "summary": "What the deployment remembers about a user (client memory), newest first",
        "parameters": [user, _BOT],
        "responses": {
            "200": _json("MemoryView", "The user's facts"),
            **_errors(400, 401, 404, 429),
        },
    }
    forget_memory = {
        "summary": "Forget a user: every remembered fact and their memory preferences",
        "parameters": [user, _BOT],
        "responses": {"204": {"description": "Deleted"}, **_errors(400, 401, 404, 429)},
    }
    forget_fact = {
        "summary": "Delete one remembered fact of a user",
        "parameters": [
            user,
            _BOT,
            {
                "name": "factId",
                "in": "path",
                "required": True,
                "schema": {"type": "integer", "minimum": 1},
            },
        ],
        "responses": {"204": {"description": "Deleted"}, **_errors(400, 401, 404, 429)},
    }
    stats = {
        "summary": "The operator's figures: today and the last 7 UTC days (and `days`)",
        "description": "People, consultations started / completed / reset / expired, "
        "completion rate, mean rounds, the completed by rounds used (`roundsUsed`), early "
        "finishes, follow-ups, tokens and cost by model, "
        "and the median and 95th percentile seconds to a final answer; when a bot sells plans, "
        "or payments or active plans exist, the Stars per day and the plans active (`sales`, "
        "bot N's with `bot`). A start counts on "
        "the UTC day it happened, an end (final answer, reset, expiry) on its own day.",
        "parameters": [
            {"name": "days", "in": "query", "required": False,
             "description": "Also the figures of the last `days` UTC days (`lastDays`)",
             "schema": {"type": "integer", "minimum": 1, "maximum": MAX_DAYS}},
            {"name": "bot", "in": "query", "required": False,
             "description": "Only the figures of one bot, its Telegram chats' and its "
             "API sessions' (those that named it in `bot`): 0 the deployment's own "
             "(TELEGRAM_BOT_TOKEN, and the API without `bot`), N the bots table's bot N; "
             "without it every consultation's, the terminal's included",
             "schema": {"type": "integer", "minimum": 0, "maximum": MAX_SCOPE}},
        ],
        "responses": {"200": _json("StatsResponse", "The figures"), **_errors(400, 401, 429)},
    }  # fmt: skip
    health = {
        "summary": "Liveness and readiness (store reachable, model configured, loops working)",
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
            "version": "1.8.0",
            "description": "Bounded multi-round expert consultations: a few clarifying "
            "rounds, then one complete answer. Error codes: "
            + ", ".join(f"{code} ({status})" for code, status in STATUS.items()),
        },
        "paths": {
            "/api/chat": {"post": {**chat, "operationId": "chat"}},
            "/api/chat/stream": {"post": {**stream, "operationId": "chatStream"}},
            "/api/sessions/{sessionId}": {
                "get": {**session, "operationId": "getSession"},
                "delete": {**forget, "operationId": "deleteSession"},
            },
            "/api/sessions/{sessionId}/export": {"get": {**export, "operationId": "exportSession"}},
            "/api/users/{userId}/memory": {
                "get": {**memory, "operationId": "getUserMemory"},
                "delete": {**forget_memory, "operationId": "deleteUserMemory"},
            },
            "/api/users/{userId}/memory/{factId}": {
                "delete": {**forget_fact, "operationId": "deleteUserFact"}
            },
            "/api/stats": {"get": {**stats, "operationId": "getStats"}},
            "/api/openapi.json": {
                "get": {
                    "summary": "This document",
                    "operationId": "openapi",
                    "responses": {"200": spec, **_errors(401, 429)},
                }
            },
            **openai_paths(),
            "/healthz": {"get": {**health, "operationId": "health"}},
            "/metrics": {"get": {**metrics, "operationId": "metrics"}},
        },
        "components": {"schemas": schemas},
    }
    if with_token:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document
