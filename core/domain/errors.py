"""Errors the engine raises; the edges (bot, HTTP API) turn them into user-facing text."""

from __future__ import annotations

import enum


class ConfigError(Exception):
    """A setting is missing or invalid; the message names the variable to fix."""


class ModelErrorKind(enum.StrEnum):
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"  # 5xx, connection refused, reset
    REJECTED = "rejected"  # another 4xx: a request the provider refuses
    CONTEXT_TOO_LONG = "context_too_long"  # the prompt is over the model's context
    MISCONFIGURED = "misconfigured"  # 401/403/404: key, base URL or model name is wrong
    # A request with images refused by a model that takes text only. The service asks
    # again without them (`Notice.IMAGES_NOT_SEEN`), so this kind never reaches an edge.
    IMAGES_REJECTED = "images_rejected"
    # A request with a structured-output schema the server refuses (`response_format`).
    # The service asks in the next form, or in text (`core.domain.llm_format`), so it never
    # reaches an edge.
    FORMAT_REFUSED = "format_refused"
    # A request offering `tools` refused for them (a 400/422 naming them). The engine asks
    # again without tools and remembers the endpoint lacks them, so it never reaches an edge.
    TOOLS_REFUSED = "tools_refused"


NOT_RETRYABLE = frozenset(
    {
        ModelErrorKind.CONTEXT_TOO_LONG,
        ModelErrorKind.MISCONFIGURED,
        ModelErrorKind.IMAGES_REJECTED,
    }
)
"""Kinds the same request will meet again: users are told what helps instead of a retry."""


class TurnDidNotHappen(Exception):
    """A turn ended without its reply stored and left nothing half-done: no round was used,
    and the user's message is either kept as the open turn (/retry or the next message
    answers it) or was never stored (the same message can be sent again).

    Each edge words every member of this family in one place
    (`bot.commands.turns.did_not_happen_text`, `api.chat.did_not_happen`,
    `terminal.repl.did_not_happen_line`), and its tests fail for a member it does not word.
    A refusal known before the turn starts (an attachment not taken, an empty message,
    nothing to retry) is a `ConsultationError` instead: the same request meets it again.
    """


class ModelError(TurnDidNotHappen):
    """The model could not answer, after the client's own retries.

    `detail` is for the operator's log: for CONTEXT_TOO_LONG and MISCONFIGURED it names
    the setting to change. Users are told by `kind` alone. Whether a retry can help
    depends on the kind (`NOT_RETRYABLE`).
    """

    def __init__(
        self, kind: ModelErrorKind, detail: str = "", *, context_tokens: int | None = None
    ) -> None:
        super().__init__(f"{kind}: {detail}" if detail else str(kind))
        self.kind = kind
        self.detail = detail
        self.context_tokens = context_tokens  # the model's context size, when the error named it


class ConsultationError(Exception):
    """A request the engine refuses; `code` is stable and machine-readable."""

    code = "CONSULTATION_ERROR"


class SessionNotFound(ConsultationError):
    code = "SESSION_NOT_FOUND"


class DialogCompleted(ConsultationError):
    code = "DIALOG_COMPLETED"


class InvalidMaxRounds(ConsultationError):
    code = "INVALID_MAX_ROUNDS"


class NothingToRetry(ConsultationError):
    code = "NOTHING_TO_RETRY"


class NoActiveConsultation(ConsultationError):
    code = "NO_ACTIVE_CONSULTATION"


class EmptyMessage(ConsultationError):
    code = "EMPTY_MESSAGE"


class AnswerInvalid(ConsultationError):
    """An answer naming a question or option the round does not have, or with no text."""

    code = "ANSWER_INVALID"


class AnswerStale(ConsultationError):
    """An answer to a round that is not the consultation's current one (an old round, a
    finished or another consultation, a round that asked nothing): nothing is stored."""

    code = "ANSWER_STALE"


class FollowUpReason(enum.StrEnum):
    """Why a consultation takes no follow-up; the edges word each one."""

    NOT_FOUND = "not_found"  # no such consultation in this chat (or none at all)
    NOT_COMPLETE = "not_complete"  # it has no final answer yet
    EXPIRED = "expired"  # idle for longer than the session TTL since its last activity
    LIMIT_REACHED = "limit_reached"  # every follow-up it may take was asked
    DISABLED = "disabled"  # FOLLOWUP_LIMIT is 0


class FollowUpUnavailable(ConsultationError):
    """A follow-up the consultation cannot take (`reason`); nothing was stored."""

    code = "FOLLOW_UP_UNAVAILABLE"

    def __init__(self, reason: FollowUpReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else str(reason))
        self.reason = reason
        self.detail = detail


class StoreUnavailable(TurnDidNotHappen):
    """The store cannot read or write right now (disk full, I/O error, file gone or read-only).

    Nothing half-done was kept: the operation that raised it was rolled back, so
    the same request can be made again once the store recovers. Any store operation
    raises it, within a turn or not.
    """


class TurnCancelled(TurnDidNotHappen):
    """A reset stopped the turn while the model was answering; no reply was stored."""


class UnknownRole(ConsultationError):
    """A role name that is not among the prompt library's roles."""

    code = "UNKNOWN_ROLE"


class UnknownModel(ConsultationError):
    """A model name that is not among the models chats may choose (LLM_MODELS)."""

    code = "UNKNOWN_MODEL"


class ActiveConsultationExists(Exception):
    """The store refused to create a second ACTIVE consultation for one chat key: another
    writer (another process, or a turn racing this one) started one first."""

    def __init__(self, chat_key: str) -> None:
        super().__init__(f"chat {chat_key!r} already has an active consultation")
        self.chat_key = chat_key


class TurnSuperseded(TurnDidNotHappen):
    """The consultation moved on while this turn ran (another writer recorded a reply for
    the same round), so this turn's reply was not stored. Whoever advanced it answered
    the user; this turn has nothing left to say."""


class TurnAlreadyHandled(TurnSuperseded):
    """An update handled a second time whose turn has nothing left to answer: its message
    was stored, never answered, and its consultation moved on since (reset, expired or
    ended). Nothing is stored and the model is not called; like any superseded turn,
    there is nothing to tell the user."""


class AttachmentProblem(enum.StrEnum):
    """Why an attachment was not taken; the edges word each one for the user."""

    TOO_LARGE = "too_large"  # over a byte limit (`limit`), refused before it is read
    UNSUPPORTED = "unsupported"  # a kind of file no reader takes (archives, programs…)
    VOICE_OFF = "voice_off"  # no transcription model is configured
    VISION_OFF = "vision_off"  # an image, and the model is not set up to see images
    UNREADABLE = "unreadable"  # a supported kind, but broken or encrypted
    NO_TEXT = "no_text"  # read fine, but nothing to read (a scanned PDF, silence)
    TRANSCRIPTION_FAILED = "transcription_failed"  # the transcription service failed
    TOO_COSTLY = "too_costly"  # reading it took longer, or more memory, than a file may


class AttachmentRefused(ConsultationError):
    """An attachment cannot become part of the turn; nothing was stored and no round used.

    `limit` is the byte limit for TOO_LARGE; `name` the file's name when it has one.
    """

    code = "ATTACHMENT_REFUSED"

    def __init__(
        self,
        problem: AttachmentProblem,
        detail: str = "",
        *,
        limit: int | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(f"{problem}: {detail}" if detail else str(problem))
        self.problem = problem
        self.detail = detail
        self.limit = limit
        self.name = name
