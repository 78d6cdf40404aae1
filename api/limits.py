"""What one chat request may ask for, checked before anything else happens.

Invariants:
- every limit is checked before a session is opened, a file read or the model called,
  so a request over one is a plain JSON error that leaves nothing behind;
- the message, each answer's text, the system prompt and the output schema each go into
  model requests, so MAX_INPUT_CHARS bounds each of them;
- the body is refused as soon as it is over the chat endpoints' own limit (which
  admits attachments): a declared length over it is refused unread, and reading stops
  at the first chunk that takes it over.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from api.attachments import chat_body_limit
from api.body_budget import Reservation, server_busy
from api.config import ApiConfig
from api.errors import ApiError
from api.schemas import ChatRequest
from media.intake import Intake


@dataclass(frozen=True, slots=True)
class Limits:
    """What one API request may ask for (MAX_INPUT_CHARS, API_ALLOWED_MODELS, …)."""

    max_rounds: int
    max_body_bytes: int
    max_input_chars: int
    models: frozenset[str]
    max_tokens: int

    @classmethod
    def of(cls, config: ApiConfig, intake: Intake | None = None) -> Limits:
        return cls(
            max_rounds=config.max_rounds_limit,
            max_body_bytes=chat_body_limit(config.max_body_bytes, intake),
            max_input_chars=config.max_input_chars,
            models=config.models,
            max_tokens=config.max_tokens_limit,
        )

    def check(self, body: ChatRequest) -> None:
        """Raise `ApiError` for the first limit the request is over.

        The message, each answer's text, the system prompt and the output schema each go
        into model requests, so MAX_INPUT_CHARS bounds each of them (an object schema as
        its JSON text).
        """
        texts = (
            ("message", body.message),
            *((f"answers[{n}].text", a.text) for n, a in enumerate(body.answers)),
            ("systemPrompt", body.system_prompt),
            ("outputSchema", body.options().output_schema),
        )
        for field, text in texts:
            if text is not None and len(text) > self.max_input_chars:
                raise ApiError(
                    "VALIDATION_ERROR",
                    f"{field}: at most {self.max_input_chars} characters "
                    f"(MAX_INPUT_CHARS), got {len(text)}",
                )
        if body.max_rounds is not None and body.max_rounds > self.max_rounds:
            raise ApiError(
                "MAX_ROUNDS_EXCEEDED", f"maxRounds: at most {self.max_rounds} rounds are allowed"
            )
        if body.model is not None and body.model not in self.models:
            allowed = ", ".join(sorted(self.models))
            raise ApiError(
                "VALIDATION_ERROR", f"model: {body.model!r} is not available; allowed: {allowed}"
            )
        if body.max_tokens is not None and body.max_tokens > self.max_tokens:
            raise ApiError("VALIDATION_ERROR", f"maxTokens: at most {self.max_tokens}")


async def read_body(request: web.Request, limit: int, reservation: Reservation) -> bytearray:
    """The whole body, refused once it is over `limit` (the chat endpoints' own limit,
    which admits attachments, instead of the server-wide API_MAX_BODY_BYTES).

    A body of declared length was reserved before this is called and is read into one
    buffer of that size (no copy grows beside it); a body without a length grows its
    `reservation` as it arrives, refused with SERVER_BUSY once the budget has no room.
    """
    length = request.content_length
    if length is not None:
        refuse_declared_over(request, limit)
        return await _read_declared(request, length)
    body = bytearray()
    async for chunk in request.content.iter_chunked(1 << 16):
        body += chunk
        if len(body) > limit:
            raise _too_large(limit)
        if not reservation.grow_to(len(body)):
            raise server_busy()
    return body


def refuse_declared_over(request: web.Request, limit: int) -> None:
    """PAYLOAD_TOO_LARGE for a body whose declared length is over `limit`; its connection
    is closed after the answer, the body unread."""
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit, close=True)


def _too_large(limit: int, *, close: bool = False) -> ApiError:
    message = f"the request body is over {limit} bytes"
    return ApiError("PAYLOAD_TOO_LARGE", message, close=close)


async def _read_declared(request: web.Request, length: int) -> bytearray:
    """Exactly `length` bytes, into a buffer allocated once (aiohttp ends the body there)."""
    body = bytearray(length)
    view = memoryview(body)
    filled = 0
    try:
        async for chunk in request.content.iter_chunked(1 << 16):
            if filled + len(chunk) > length:
                break
            view[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
    finally:
        view.release()
    if filled != length:  # the parser ends the body at its declared length
        raise ApiError("VALIDATION_ERROR", "the request body could not be read")
    return body
