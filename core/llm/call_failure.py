"""A model call that failed, however it was sent: the SDK's exceptions and the wire's
failures in one shape, and what the engine makes of it.

Invariant: `CallFailed` is raised from what reported the failure (the SDK's exception,
or the wire's, itself raised from the HTTP library's), so `hung_up` and `refused` read
the same causes whichever path the call took; every rule about a failure (is it worth
a retry, does it refuse a response format, which `ModelError` kind is it) is written
once, here, over that shape.
"""

from __future__ import annotations

import json

from core.domain.errors import ModelError, ModelErrorKind
from core.domain.ports import CompletionRequest
from core.llm.llm_errors import (
    context_overflow,
    format_refused,
    has_images,
    hung_up,
    images_refused,
    images_rejected,
    refused,
    status_error,
    tools_refused,
)

RETRIED_STATUSES = frozenset({408, 409, 429})
"""Statuses retried besides every 5xx (the SDK's rule: request and lock timeouts, rate limits)."""


class CallFailed(Exception):
    """A call's failure after its retries.

    `status`: the HTTP status of an error answer (None: no answer, or an error event in
    the stream); `message`: its words ("Error code: 400 - …" for a status, as the SDK
    says it); `code`: the error object's `code`; `body`: the error object (or the body's
    text when it is not JSON); `url`: the request's; `connection`: no answer came, or the
    connection broke (a timeout when `timed_out`).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        body: object = None,
        url: str = "",
        connection: bool = False,
        timed_out: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.body = body
        self.url = url
        self.connection = connection or timed_out
        self.timed_out = timed_out


def model_error(failure: CallFailed, request: CompletionRequest) -> ModelError:
    """Classify what is left after the retries into the engine's error kinds (images
    and tools refused only when `request` carried them)."""
    detail = failure.message
    status = failure.status
    if status is not None and has_images(request) and images_refused(status, detail):
        return images_rejected(detail)
    if status is not None and request.tools:
        said = detail if tools_refused(status, detail) else body_text(failure.body)
        if tools_refused(status, said):
            return ModelError(ModelErrorKind.TOOLS_REFUSED, f"HTTP {status}: {said}")
    if (overflow := context_overflow(failure.code, detail)) is not None:
        return overflow
    if failure.timed_out:
        if refused(failure):  # the SDK's aiohttp transport reports a refused connect so
            return ModelError(ModelErrorKind.UNAVAILABLE, "connection failed")
        return ModelError(ModelErrorKind.TIMEOUT, detail)
    if status == 429:
        return ModelError(ModelErrorKind.RATE_LIMITED, detail)
    if status is not None:
        return status_error(status, detail, failure.url)
    # Connection refused/reset, an error event mid-stream, an unparsable response.
    return ModelError(ModelErrorKind.UNAVAILABLE, detail)


def retried(failure: CallFailed) -> bool:
    """Whether the SDK's rule retries it: a connection error or timeout, or 408, 409,
    429 or a 5xx."""
    if failure.status is not None:
        return failure.status in RETRIED_STATUSES or failure.status >= 500
    return failure.connection


def schema_refused(failure: CallFailed) -> bool:
    """Whether a call with json_schema may have failed for the schema: an error status whose
    message names the response format (400 or 422; llama-cpp-python's server answers 500 with
    its validation error), or a hang-up without an answer (not a refused connect, not a
    timeout)."""
    if failure.status is not None:
        # FastAPI's own 422 keeps its words in `detail`, which the SDK leaves out of
        # `message` ("Error code: 422"): the body tells.
        return format_refused(failure.message) or format_refused(body_text(failure.body))
    return failure.connection and hung_up(failure)


def body_text(body: object) -> str:
    """An error body's words, whatever its shape (bounded: a body is a server's)."""
    try:
        return json.dumps(body, ensure_ascii=False)[:4096]
    except (TypeError, ValueError):
        return ""
