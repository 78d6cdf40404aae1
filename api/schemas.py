"""The HTTP API's bodies (seed 003 §2), validated strictly before they reach the engine.

Invariant: a request that passes `parse_chat_request` has a non-blank message, a
canonical UUID `sessionId` (if any), `maxRounds` ≥ 1 (if any) and values of exactly
the declared JSON types — `"maxRounds": "3"` is refused, never coerced. Unknown
fields are ignored. The OpenAPI document is generated from these same models.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from api.errors import STATUS, ApiError
from core.models import ModelOptions
from core.outcomes import Reply

_CAMEL = ConfigDict(alias_generator=to_camel, validate_by_alias=True, serialize_by_alias=True)


class ChatRequest(BaseModel):
    """`POST /api/chat`: without `sessionId` a new session, with it the next round."""

    model_config = ConfigDict(**_CAMEL, strict=True, extra="ignore")

    message: str = Field(
        min_length=1,
        description="The user's message; must not be blank.",
        json_schema_extra={"pattern": r"\S"},
    )
    model: str | None = Field(None, min_length=1, max_length=200)
    max_tokens: int | None = Field(None, ge=1)
    disable_search: bool | None = None
    system_prompt: str | None = Field(None, description="Replaces the default expert persona.")
    output_format: Literal["text", "json"] | None = Field(
        None, description='"json": the final answer is valid JSON (questions stay text).'
    )
    output_schema: str | dict[str, Any] | None = Field(
        None, description="A JSON Schema the final JSON answer should follow."
    )
    max_rounds: int | None = Field(
        None,
        ge=1,
        description="Rounds in the dialog (default 1: single-round mode). On a continuing "
        "request a different value changes the session's limit, like /rounds.",
    )
    session_id: str | None = Field(
        None,
        description="Continue this session (a UUID from an earlier response).",
        json_schema_extra={"format": "uuid"},
    )

    @field_validator("message")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("session_id")
    @classmethod
    def _uuid(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return str(uuid.UUID(value))
        except ValueError:
            raise ValueError("must be a UUID") from None

    def options(self) -> ModelOptions:
        """Per-session model parameters for a new session."""
        schema = self.output_schema
        if isinstance(schema, dict):
            schema = json.dumps(schema, ensure_ascii=False)
        return ModelOptions(
            model=self.model,
            max_tokens=self.max_tokens,
            disable_search=self.disable_search,
            output_format="json" if self.output_format == "json" else None,
            output_schema=schema,
        )


class ChatResponse(BaseModel):
    """One answered round (seed 003 §2.2); `content` is the assistant's reply."""

    model_config = ConfigDict(**_CAMEL, validate_by_name=True, extra="forbid")

    content: str
    model: str | None = None
    is_complete: bool
    round: int = Field(ge=1)
    max_rounds: int = Field(ge=1)
    session_id: str = Field(json_schema_extra={"format": "uuid"})

    @classmethod
    def from_reply(cls, reply: Reply) -> ChatResponse:
        return cls(
            content=reply.text,
            model=reply.model,
            is_complete=reply.is_complete,
            round=reply.round,
            max_rounds=reply.max_rounds,
            session_id=reply.consultation_id,
        )


class ErrorResponse(BaseModel):
    """Every error; `sessionId` appears on model errors so the round can be retried."""

    model_config = ConfigDict(**_CAMEL, validate_by_name=True, extra="forbid")

    error: str
    code: str = Field(json_schema_extra={"enum": list(STATUS)})
    session_id: str | None = Field(None, json_schema_extra={"format": "uuid"})


class HealthResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["ok", "unavailable"]
    store: bool
    model: str | None


def parse_chat_request(raw: bytes) -> ChatRequest:
    """Validate a request body; raise `ApiError` with the code the first problem deserves."""
    try:
        return ChatRequest.model_validate_json(raw)
    except ValidationError as exc:
        raise _api_error(exc) from None


def _api_error(exc: ValidationError) -> ApiError:
    error = exc.errors(include_url=False)[0]
    kind, loc = error["type"], error["loc"]
    if kind == "json_invalid":
        return ApiError("VALIDATION_ERROR", "the body is not valid JSON")
    if not loc:
        return ApiError("VALIDATION_ERROR", "the body must be a JSON object")
    field = str(loc[0])
    message = str(error["msg"]).removeprefix("Value error, ")
    code = "INVALID_MAX_ROUNDS" if field == "maxRounds" else "VALIDATION_ERROR"
    if kind == "missing":
        message = "is required"
    return ApiError(code, f"{field}: {message}")
