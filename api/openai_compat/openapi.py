"""The `/v1/` routes in the OpenAPI document: their paths and the OpenAI shapes' schemas.

Invariant: the schemas describe what `api.openai_compat.requests` takes and
`api.openai_compat.shapes` writes (the limits from the same constants), and a test
validates real requests, replies, chunks and errors against them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from api.openai_compat.requests import MAX_MESSAGES, MAX_METADATA_KEYS, MAX_USER_CHARS
from api.schemas import BOT_REF_PATTERN

_PREFIX = "OpenAI"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{_PREFIX}{name}"}


def _json(name: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


_USAGE = {
    "type": "object",
    "properties": {
        "prompt_tokens": {"type": "integer", "minimum": 0},
        "completion_tokens": {"type": "integer", "minimum": 0},
        "total_tokens": {"type": "integer", "minimum": 0},
    },
    "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
}
_CONSULTATION = {
    "type": "object",
    "description": "Where the consultation stands after this reply (not in the OpenAI shape; "
    "the `openai` package keeps it as an extra field).",
    "properties": {
        "id": {"type": "string", "description": "The stored session (`GET /api/sessions/{id}`)."},
        "round": {"type": "integer", "minimum": 1},
        "max_rounds": {"type": "integer", "minimum": 1},
        "final": {"type": "boolean"},
        "follow_up": {"type": "integer", "minimum": 0},
        "follow_ups_left": {"type": ["integer", "null"], "minimum": 0},
    },
    "required": ["id", "round", "max_rounds", "final", "follow_up", "follow_ups_left"],
}


def openai_schemas(models: Sequence[str], max_rounds: int) -> dict[str, Any]:
    """The components' schemas of the `/v1/` routes, by name."""
    text_part = {
        "type": "object",
        "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
        "required": ["type", "text"],
    }
    message = {
        "type": "object",
        "properties": {
            "role": {"enum": ["system", "developer", "user", "assistant"]},
            "content": {"anyOf": [{"type": "string"}, {"type": "array", "items": text_part}]},
        },
        "required": ["role", "content"],
    }
    request = {
        "type": "object",
        "description": "The whole conversation, as chat apps send it each time: the first user "
        "message is the request, each assistant message a round, the user messages after it "
        "its answers (labels such as `1a 2c` pick options; `/answer` asks the final answer "
        "now); system messages are added to the persona's instructions. Other OpenAI fields "
        "(`temperature`, `max_tokens`, …) are accepted and ignored.",
        "properties": {
            "model": {
                "type": "string",
                "description": "One of "
                + ", ".join(f"`{m}`" for m in models)
                + f"; a suffix `-N` (1 to {max_rounds}) sets the rounds.",
            },
            "messages": {
                "type": "array",
                "items": _ref("Message"),
                "minItems": 1,
                "maxItems": MAX_MESSAGES,
            },
            "stream": {"type": ["boolean", "null"]},
            "stream_options": {
                "type": ["object", "null"],
                "properties": {"include_usage": {"type": "boolean"}},
            },
            "user": {"type": ["string", "null"], "maxLength": MAX_USER_CHARS},
            "metadata": {
                "type": ["object", "null"],
                "maxProperties": MAX_METADATA_KEYS,
                "properties": {
                    "rounds": {
                        "type": "string",
                        "pattern": "^[0-9]{1,3}$",
                        "description": f"The consultation's rounds, 1 to {max_rounds}.",
                    },
                    "bot": {
                        "type": "string",
                        "pattern": BOT_REF_PATTERN,
                        "description": "The bot this conversation is for: a stored bot's id "
                        "or `@username`; without it (or 0) the deployment's own bot. It runs "
                        "with that bot's role or instruction, rounds, model and limits, and "
                        "its conversation, the `user`'s memory and quotas are that bot's.",
                    },
                },
            },
            "n": {"const": 1},
        },
        "required": ["model", "messages"],
    }
    completion = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "chat.completion"},
            "created": {"type": "integer"},
            "model": {"type": "string"},
            "choices": {
                "type": "array",
                "minItems": 1,
                "maxItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "index": {"const": 0},
                        "message": {
                            "type": "object",
                            "properties": {
                                "role": {"const": "assistant"},
                                "content": {
                                    "type": "string",
                                    "description": "Markdown: a round's questions with "
                                    "their options as `1a) …` items, or the final answer "
                                    "with its sources.",
                                },
                            },
                            "required": ["role", "content"],
                        },
                        "finish_reason": {"enum": ["stop", "length"]},
                    },
                    "required": ["index", "message", "finish_reason"],
                },
            },
            "usage": _USAGE,
            "consultation": _CONSULTATION,
        },
        "required": ["id", "object", "created", "model", "choices", "usage"],
    }
    chunk = {
        "type": "object",
        "description": "One `data:` event of a stream; the stream ends with `data: [DONE]`.",
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "chat.completion.chunk"},
            "created": {"type": "integer"},
            "model": {"type": "string"},
            "choices": {
                "type": "array",
                "maxItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "index": {"const": 0},
                        "delta": {
                            "type": "object",
                            "properties": {
                                "role": {"const": "assistant"},
                                "content": {"type": "string"},
                            },
                        },
                        "finish_reason": {"enum": ["stop", "length", None]},
                    },
                    "required": ["index", "delta", "finish_reason"],
                },
            },
            "usage": _USAGE,
            "consultation": _CONSULTATION,
        },
        "required": ["id", "object", "created", "model", "choices"],
    }
    model = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "model"},
            "created": {"type": "integer"},
            "owned_by": {"type": "string"},
        },
        "required": ["id", "object", "created", "owned_by"],
    }
    error = {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                    "param": {"type": ["string", "null"]},
                    "code": {"type": ["string", "null"]},
                },
                "required": ["message", "type", "param", "code"],
            }
        },
        "required": ["error"],
    }
    listed = {
        "type": "object",
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": _ref("Model")},
        },
        "required": ["object", "data"],
    }
    return {
        f"{_PREFIX}{name}": schema
        for name, schema in {
            "Message": message,
            "ChatRequest": request,
            "ChatCompletion": completion,
            "ChatCompletionChunk": chunk,
            "Model": model,
            "ModelList": listed,
            "Error": error,
        }.items()
    }


_ERRORS = {
    400: "invalid_request_error: the body, a message, `metadata.rounds`, `metadata.bot` or "
    "the labels of the "
    "last message (`param` names the field); nothing was stored",
    401: "invalid_api_key: no or a wrong bearer token (when API_TOKEN is set)",
    403: "permission_error: the `user` is blocked by the operator",
    404: "model_not_found: the model is not one of GET /v1/models; or bot_not_found: "
    "`metadata.bot` names no enabled bot (nothing was stored)",
    409: "conflict: another request answered this turn meanwhile",
    413: "request_too_large: the body is over the limit",
    429: "rate_limit_exceeded (API_RATE_LIMIT_PER_MINUTE) or insufficient_quota (the token's "
    "or the `user`'s quotas); Retry-After says when to retry; nothing was stored",
    500: "server_error",
    502: "server_error: the model refused the request or is misconfigured",
    503: "server_error: the model or the store is unavailable, or the server is busy; retry",
    504: "server_error: the model did not answer in time; retry",
}
_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds until the request may be sent again.",
        "schema": {"type": "integer", "minimum": 1},
    }
}


def _errors(*statuses: int) -> dict[str, Any]:
    errors = {str(status): _json("Error", _ERRORS[status]) for status in statuses}
    if "429" in errors:
        errors["429"]["headers"] = _RETRY_AFTER
    return errors


def openai_paths() -> dict[str, Any]:
    """The `/v1/` paths."""
    completions = {
        "summary": "The consultation as an OpenAI chat completion",
        "description": "Stateless: the conversation is rebuilt from `messages` each time "
        "(see docs/openai-endpoint.md). With `stream`, Server-Sent Events of "
        "`OpenAIChatCompletionChunk`, then `data: [DONE]`.",
        "operationId": "openaiChatCompletions",
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _ref("ChatRequest")}},
        },
        "responses": {
            "200": {
                "description": "The reply, whole (JSON) or streamed (`text/event-stream`)",
                "content": {
                    "application/json": {"schema": _ref("ChatCompletion")},
                    "text/event-stream": {"schema": _ref("ChatCompletionChunk")},
                },
            },
            **_errors(400, 401, 403, 404, 409, 413, 429, 500, 502, 503, 504),
        },
    }
    return {
        "/v1/models": {
            "get": {
                "summary": "The consultation's models: one per persona",
                "operationId": "openaiListModels",
                "responses": {"200": _json("ModelList", "The models"), **_errors(401, 429)},
            }
        },
        "/v1/models/{model_id}": {
            "get": {
                "summary": "One model",
                "operationId": "openaiGetModel",
                "parameters": [
                    {
                        "name": "model_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
                "responses": {"200": _json("Model", "The model"), **_errors(401, 404, 429)},
            }
        },
        "/v1/chat/completions": {"post": completions},
    }
