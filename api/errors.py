"""Every failure the HTTP API reports, as one JSON shape: `{"error": "...", "code": "..."}`.

Invariant: a client never sees a traceback, an HTML error page or a status not
listed in `STATUS`; engine errors and aiohttp's own HTTP errors are mapped here.
"""

from __future__ import annotations

import functools
import json
import math
import time
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from core.domain.errors import (
    AttachmentProblem,
    AttachmentRefused,
    ConsultationError,
    FollowUpReason,
    FollowUpUnavailable,
    ModelError,
    ModelErrorKind,
)
from core.domain.quotas import Limit, QuotaExceeded, QuotaHit
from media.documents import SUPPORTED_DOCUMENTS

STATUS: dict[str, int] = {
    "VALIDATION_ERROR": 400,
    "INVALID_MAX_ROUNDS": 400,
    "MAX_ROUNDS_EXCEEDED": 400,
    "DIALOG_COMPLETED": 400,
    "UNAUTHORIZED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "SESSION_NOT_FOUND": 404,
    "FACT_NOT_FOUND": 404,
    "BOT_NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "CONFLICT": 409,
    "ANSWER_STALE": 409,
    "FOLLOW_UP_UNAVAILABLE": 409,
    "PAYLOAD_TOO_LARGE": 413,
    "CONTEXT_TOO_LONG": 413,
    "IDEMPOTENCY_KEY_REUSED": 422,
    "ATTACHMENT_REFUSED": 422,
    "ANSWER_INVALID": 422,
    "RATE_LIMITED": 429,
    "QUOTA_EXCEEDED": 429,
    "INTERNAL_ERROR": 500,
    "MODEL_ERROR": 502,
    "MODEL_MISCONFIGURED": 502,
    "MODEL_UNAVAILABLE": 503,
    "STORE_UNAVAILABLE": 503,
    "SERVER_BUSY": 503,
    "MODEL_TIMEOUT": 504,
}
"""Error code → HTTP status; the OpenAPI document lists the same codes."""

_ENGINE_CODES = {
    "SESSION_NOT_FOUND": "SESSION_NOT_FOUND",
    "DIALOG_COMPLETED": "DIALOG_COMPLETED",
    "INVALID_MAX_ROUNDS": "INVALID_MAX_ROUNDS",
    "EMPTY_MESSAGE": "VALIDATION_ERROR",
    "ANSWER_INVALID": "ANSWER_INVALID",
    "ANSWER_STALE": "ANSWER_STALE",
}

_FOLLOW_UP_REFUSALS = {
    FollowUpReason.NOT_FOUND: "the session has no such consultation",
    FollowUpReason.NOT_COMPLETE: "the session has no final answer yet: send the next round "
    "without followUp",
    FollowUpReason.EXPIRED: "the session ended too long ago to take follow-ups (more than "
    "SESSION_TTL_SECONDS since its last activity): start a new session",
    FollowUpReason.LIMIT_REACHED: "the session has taken all its follow-ups (FOLLOWUP_LIMIT): "
    "start a new session",
    FollowUpReason.DISABLED: "follow-ups are turned off on this deployment (FOLLOWUP_LIMIT=0)",
}

_MODEL_CODES = {
    ModelErrorKind.REJECTED: ("MODEL_ERROR", "the model rejected the request"),
    ModelErrorKind.IMAGES_REJECTED: ("MODEL_ERROR", "the model does not accept images"),
    ModelErrorKind.FORMAT_REFUSED: ("MODEL_ERROR", "the model refused the reply format"),
    ModelErrorKind.TOOLS_REFUSED: ("MODEL_ERROR", "the model refused the tools"),
    ModelErrorKind.UNAVAILABLE: ("MODEL_UNAVAILABLE", "the model is unavailable, try again"),
    ModelErrorKind.RATE_LIMITED: ("MODEL_UNAVAILABLE", "the model is rate limited, try again"),
    ModelErrorKind.TIMEOUT: ("MODEL_TIMEOUT", "the model did not answer in time, try again"),
    ModelErrorKind.CONTEXT_TOO_LONG: (
        "CONTEXT_TOO_LONG",
        "the conversation is too long for the model: start a new session (no sessionId) "
        "and ask more briefly",
    ),
    ModelErrorKind.MISCONFIGURED: (
        "MODEL_MISCONFIGURED",
        "the service's model connection is misconfigured; the operator has been told",
    ),
}

_HTTP_CODES = {
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
}


def json_response(
    body: Any, *, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON response with text kept readable (UTF-8, not `\\u` escapes)."""
    return web.json_response(body, status=status, headers=headers, dumps=_dumps)


_dumps = functools.partial(json.dumps, ensure_ascii=False)


class ApiError(Exception):
    """A refusal with a stable code; `extra` adds fields such as `sessionId`.

    `headers` go with its response (`Retry-After`); `close` ends the connection after it,
    for a refusal sent while the request's body is still unread.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        close: bool = False,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.headers = headers or {}
        self.close = close
        self.extra = extra

    @property
    def status(self) -> int:
        return STATUS[self.code]

    def body(self) -> dict[str, Any]:
        return {"error": self.message, "code": self.code, **self.extra}

    def response(self, headers: dict[str, str] | None = None) -> web.Response:
        response = json_response(
            self.body(), status=self.status, headers=self.headers | (headers or {})
        )
        if self.close:
            response.force_close()
        return response


def from_engine(exc: ConsultationError) -> ApiError:
    """Translate a refusal of the engine."""
    if isinstance(exc, AttachmentRefused):
        return attachment_refused(exc)
    if isinstance(exc, FollowUpUnavailable):
        return follow_up_unavailable(exc.reason)
    if isinstance(exc, QuotaExceeded):
        return quota_exceeded(exc.hit, time.time())
    return ApiError(_ENGINE_CODES.get(exc.code, "VALIDATION_ERROR"), str(exc))


def model_error(exc: ModelError) -> ApiError:
    """The model could not answer: a code by its kind, never the detail (it is the log's)."""
    code, message = _MODEL_CODES[exc.kind]
    return ApiError(code, message)


_REFUSALS = {
    AttachmentProblem.TOO_LARGE: "the file is larger than this server takes ({limit} bytes)",
    AttachmentProblem.UNSUPPORTED: "this kind of file is not taken; documents may be {supported}",
    AttachmentProblem.VOICE_OFF: "voice notes are not taken here (no transcription model is "
    "configured): send the question as text",
    AttachmentProblem.VISION_OFF: "photos are not taken here (the model does not see images): "
    "describe it in words",
    AttachmentProblem.UNREADABLE: "the file could not be read (broken or encrypted)",
    AttachmentProblem.NO_TEXT: "there is no text to read in it (a scan or a silent recording?)",
    AttachmentProblem.TRANSCRIPTION_FAILED: "the voice note could not be transcribed right "
    "now: try again later",
    AttachmentProblem.TOO_COSTLY: "reading the file took too long or too much memory: send a "
    "smaller or simpler file, or the text itself",
}


def attachment_refused(exc: AttachmentRefused) -> ApiError:
    """A file the request cannot use: ATTACHMENT_REFUSED naming the problem, the file and
    (for `too_large`) the limit. Nothing was stored and no round was used."""
    message = _REFUSALS[exc.problem].format(limit=exc.limit, supported=SUPPORTED_DOCUMENTS)
    extra: dict[str, Any] = {"problem": exc.problem.value}
    if exc.name:
        message = f"{exc.name}: {message}"
        extra["name"] = exc.name
    if exc.limit is not None:
        extra["limit"] = exc.limit
    return ApiError("ATTACHMENT_REFUSED", message, **extra)


def follow_up_unavailable(reason: FollowUpReason) -> ApiError:
    """A follow-up the session cannot take: FOLLOW_UP_UNAVAILABLE with `reason` in words
    and as `reason`. Nothing was stored."""
    return ApiError("FOLLOW_UP_UNAVAILABLE", _FOLLOW_UP_REFUSALS[reason], reason=reason.value)


_QUOTAS = {
    Limit.API_DAILY_TOKENS: "this API token has used its daily tokens (API_DAILY_TOKEN_LIMIT)",
    Limit.USER_DAILY_TOKENS: "this userId has used its daily tokens (USER_DAILY_TOKEN_LIMIT)",
    Limit.USER_MONTHLY_TOKENS: "this userId has used its monthly tokens (USER_MONTHLY_TOKEN_LIMIT)",
    Limit.USER_DAILY_CONSULTATIONS: "this userId has started its consultations for today "
    "(USER_DAILY_CONSULTATION_LIMIT)",
}


def quota_exceeded(hit: QuotaHit, now: float) -> ApiError:
    """A turn a quota refused before the model was called: 429 QUOTA_EXCEEDED naming the
    limit, with `Retry-After` the whole seconds until it resets (at least 1). Nothing was
    stored and no round used."""
    wait = max(math.ceil(hit.resets_at - now), 1)
    resets = datetime.fromtimestamp(hit.resets_at, UTC).isoformat().replace("+00:00", "Z")
    return ApiError(
        "QUOTA_EXCEEDED",
        f"{_QUOTAS[hit.limit]}: nothing was stored; retry after it resets",
        headers={"Retry-After": str(wait)},
        quota=hit.limit.value,
        resetsAt=resets,
    )


def store_unavailable() -> ApiError:
    """The store cannot serve the request now (disk full, file gone); nothing half done."""
    return ApiError("STORE_UNAVAILABLE", "storage is temporarily unavailable, try again later")


def from_http(exc: web.HTTPException) -> ApiError:
    """Translate aiohttp's own error (unknown route, wrong method, body too large)."""
    code = _HTTP_CODES.get(exc.status, "VALIDATION_ERROR" if exc.status < 500 else "INTERNAL_ERROR")
    messages = {
        "NOT_FOUND": "no such endpoint",
        "METHOD_NOT_ALLOWED": "method not allowed",
        "PAYLOAD_TOO_LARGE": "the request body is too large",
    }
    return ApiError(code, messages.get(code, exc.reason.lower()))
