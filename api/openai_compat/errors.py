"""The OpenAI error object: `{"error": {"message", "type", "param", "code"}}`.

Invariant: every refusal on a `/v1/` route is this object with the status the OpenAI API
would use for it (400 a request it cannot take, 401 no or a wrong key, 404 an unknown model
or route, 429 with `Retry-After` for rate limits and quotas, 5xx the server's or the
model's failure); the API's own refusals (`api.errors.ApiError`) are translated here, their
message kept, so a chat app shows the person the same reason the JSON API gives, and an
engine failure is mapped once (`failure`), its detail logged, never sent.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from api.errors import (
    ApiError,
    attachment_refused,
    from_engine,
    json_response,
    model_error,
    store_unavailable,
)
from core.domain.errors import (
    AttachmentRefused,
    ConsultationError,
    ModelError,
    StoreUnavailable,
    TurnSuperseded,
)

log = logging.getLogger(__name__)

_TYPES: dict[str, tuple[str, str | None]] = {
    "UNAUTHORIZED": ("invalid_request_error", "invalid_api_key"),
    "FORBIDDEN": ("permission_error", "user_blocked"),
    "NOT_FOUND": ("invalid_request_error", "unknown_url"),
    "METHOD_NOT_ALLOWED": ("invalid_request_error", "method_not_allowed"),
    "RATE_LIMITED": ("requests", "rate_limit_exceeded"),
    "QUOTA_EXCEEDED": ("insufficient_quota", "insufficient_quota"),
    "PAYLOAD_TOO_LARGE": ("invalid_request_error", "request_too_large"),
    "CONTEXT_TOO_LONG": ("invalid_request_error", "context_length_exceeded"),
    "ATTACHMENT_REFUSED": ("invalid_request_error", "invalid_file"),
    "ANSWER_INVALID": ("invalid_request_error", "invalid_value"),
    "CONFLICT": ("invalid_request_error", "conflict"),
    "BOT_NOT_FOUND": ("invalid_request_error", "bot_not_found"),
}
"""The API's error code → the OpenAI error's type and code (others by status)."""


class OpenAIError(Exception):
    """A refusal in the OpenAI shape (`kind` is its `type`); `headers` go with it
    (`Retry-After`)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> web.Response:
        return json_response(self.body(), status=self.status, headers=self.headers)


def invalid(message: str, param: str | None = None, code: str = "invalid_value") -> OpenAIError:
    """400: a request the endpoint cannot take, naming the field at fault (`param`)."""
    return OpenAIError(400, message, param=param, code=code)


def model_not_found(model: str) -> OpenAIError:
    """404 for a model id this deployment does not offer (see `GET /v1/models`)."""
    return OpenAIError(
        404,
        f"The model `{model}` does not exist; GET /v1/models lists the ones offered",
        param="model",
        code="model_not_found",
    )


def from_api(error: ApiError) -> OpenAIError:
    """The API's refusal as an OpenAI error: its message and headers kept, its status too
    but 422 (which the OpenAI API does not use: a file or an answer it cannot take is 400)."""
    status = 400 if error.status == 422 else error.status
    kind, code = _TYPES.get(error.code, (None, None))
    if kind is None:
        kind = "server_error" if status >= 500 else "invalid_request_error"
        code = error.code.lower()
    if status == 400 and code is None:
        code = "invalid_value"
    return OpenAIError(status, error.message, kind=kind, code=code, headers=dict(error.headers))


def refusal_response(error: ApiError) -> web.Response:
    """The response for the API's refusal on a `/v1/` route."""
    response = from_api(error).response()
    if error.close:
        response.force_close()
    return response


def failure(exc: Exception) -> OpenAIError:
    """A reply that did not happen, as the client's error (logged here: the detail of a
    model's or the store's failure is the log's, never the client's)."""
    if isinstance(exc, OpenAIError):
        return exc
    if isinstance(exc, ApiError):
        return from_api(exc)
    if isinstance(exc, ModelError):
        log.warning("model error on /v1/chat/completions: %s", exc)
        return from_api(model_error(exc))
    if isinstance(exc, StoreUnavailable):
        log.warning("/v1/chat/completions not answered: %s", exc)
        return from_api(store_unavailable())
    if isinstance(exc, TurnSuperseded):
        return from_api(ApiError("CONFLICT", "this turn was answered by another request meanwhile"))
    if isinstance(exc, AttachmentRefused):
        return from_api(attachment_refused(exc))
    if isinstance(exc, ConsultationError):
        return from_api(from_engine(exc))
    log.error("/v1/chat/completions failed", exc_info=exc)
    return OpenAIError(500, "internal error", kind="server_error", code="internal_error")
