"""The HTTP API's bodies, validated strictly before they reach the engine.

Invariant: a request that passes `parse_chat_request` has a non-blank message, at least
one attachment (a document alone is a question) or at least one answer, a canonical UUID
`sessionId` (if any; answers require one), `maxRounds` ≥ 1 (if any), at most
`MAX_ATTACHMENTS` files, at most `MAX_ANSWERS` answers, each naming a question and exactly
one of an option or a non-blank text, and values of exactly the declared JSON types —
`"maxRounds": "3"` is refused, never coerced. An integer field takes what JSON Schema
calls an integer, so `2.0` is 2 and `2.5` is refused. Unknown fields are ignored, except
in an answer (a key it does not have is refused). No text field holds NUL (refused:
PostgreSQL cannot store it); a file's name loses its control characters. The OpenAPI
document is generated from these same models.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from api.attachments import BASE64_PATTERN, MAX_ATTACHMENTS
from api.errors import STATUS, ApiError
from core.domain.attachments import MessageInput
from core.domain.clarifying import Answer, ClarifyingRound
from core.domain.consultation import Consultation, Message, ModelOptions, Status
from core.domain.errors import AttachmentProblem, FollowUpReason
from core.domain.facts import Fact
from core.domain.knowledge_sources import KnowledgeSource
from core.domain.outcomes import Notice, Reply
from core.domain.quotas import Limit
from core.domain.telegram_keys import MAX_SCOPE
from core.domain.tools import ToolUse

_CAMEL = ConfigDict(alias_generator=to_camel, validate_by_alias=True, serialize_by_alias=True)


USER_ID_PATTERN = r"^[A-Za-z0-9_.:@-]+$"
MAX_USER_ID_CHARS = 64
USER_ID = re.compile(USER_ID_PATTERN)

BOT_REF_PATTERN = r"^(0|[1-9][0-9]{0,18}|@[A-Za-z0-9_]{1,64})$"
"""A bot as a request names it in a string: its id in digits, or `@username` (`api.bots`)."""

UUID_PATTERN = "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
"""The UUID form the API takes (what the document's pattern says, exactly)."""
_UUID = re.compile(UUID_PATTERN)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _integral(value: Any) -> Any:
    """`2.0` is the integer 2 in JSON Schema's eyes, so it is here too (`2.5` stays a float)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Count = Annotated[int, Field(ge=1), BeforeValidator(_integral)]
"""A JSON integer ≥ 1."""


def _absent(value: Any) -> bool:
    """An optional response field left out of the body: false, empty or None."""
    return not value


class AttachmentIn(BaseModel):
    """A file sent with the message: a voice note, a document or a photo."""

    model_config = ConfigDict(**_CAMEL, strict=True, extra="forbid")

    name: str = Field(
        min_length=1,
        max_length=255,
        description='The file\'s name; its extension helps tell the kind ("notes.pdf").',
    )
    mime_type: str | None = Field(
        None, max_length=255, description='The MIME type, when known ("application/pdf").'
    )
    data: str = Field(
        min_length=4,
        description="The file's bytes in standard base64 with padding, no line breaks. "
        "Its size is checked against its kind's limit before it is decoded.",
        json_schema_extra={"pattern": BASE64_PATTERN, "contentEncoding": "base64"},
    )

    @field_validator("name")
    @classmethod
    def _visible(cls, value: str) -> str:
        """Control characters (NUL, line breaks, ESC) are dropped: they would break the
        document block, and PostgreSQL cannot store NUL."""
        name = _CONTROL.sub("", value)
        if not name.strip():
            raise ValueError("must contain a visible character")
        return name


MAX_ANSWERS = 8
"""Answers one request may carry (a round asks at most four questions; a later answer to
the same question wins)."""


def _one_of_option_or_text(schema: dict[str, Any]) -> None:
    """The document's form of `AnswerIn._option_or_text`: exactly one of the two, not null."""
    schema["oneOf"] = [
        {"required": ["option"], "properties": {"option": {"type": "integer"}}},
        {"required": ["text"], "properties": {"text": {"type": "string"}}},
    ]


class AnswerIn(BaseModel):
    """An answer to one question of the session's last reply: an option or a text."""

    model_config = ConfigDict(
        **_CAMEL, strict=True, extra="forbid", json_schema_extra=_one_of_option_or_text
    )

    question: Count = Field(description="The question's number in `questions` (1 is the first).")
    option: Count | None = Field(
        None, description="The chosen option's number in that question's `options` (1-based)."
    )
    text: str | None = Field(
        None,
        pattern=r"\S",
        description="The answer in the user's words, instead of an option; not blank, "
        "at most MAX_INPUT_CHARS characters.",
    )

    @field_validator("text")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        if value is not None and "\x00" in value:  # PostgreSQL cannot store it in text
            raise ValueError("must not contain NUL (\\u0000)")
        return value

    @model_validator(mode="after")
    def _option_or_text(self) -> AnswerIn:
        if (self.option is None) == (self.text is None):
            raise ValueError("give exactly one of option and text")
        return self

    def answer(self) -> Answer:
        return Answer(self.question, self.option, self.text)


def _message_or_files(schema: dict[str, Any]) -> None:
    """The document's form of the rules `parse_chat_request` enforces: a message, files or
    answers; answers only with a session."""
    schema["anyOf"] = [
        {"required": ["message"], "properties": {"message": {"pattern": r"\S"}}},
        {"required": ["attachments"], "properties": {"attachments": {"minItems": 1}}},
        {"required": ["answers"], "properties": {"answers": {"minItems": 1}}},
    ]
    schema["if"] = {"required": ["answers"], "properties": {"answers": {"minItems": 1}}}
    schema["then"] = {"required": ["sessionId"], "properties": {"sessionId": {"type": "string"}}}


class ChatRequest(BaseModel):
    """`POST /api/chat`: without `sessionId` a new session, with it the next round."""

    model_config = ConfigDict(
        **_CAMEL, strict=True, extra="ignore", json_schema_extra=_message_or_files
    )

    message: str = Field(
        "",
        description="The user's message; must not be blank, unless attachments or answers "
        "are sent (then it may be empty).",
    )
    attachments: list[AttachmentIn] = Field(
        default_factory=list,
        max_length=MAX_ATTACHMENTS,
        description="Files sent with the message: voice notes (transcribed), documents "
        "(their text: plain text, Markdown, CSV, JSON, source code, PDF, DOCX) and photos "
        "(for a model that sees images). One voice note per request.",
    )
    answers: list[AnswerIn] = Field(
        default_factory=list,
        max_length=MAX_ANSWERS,
        description="Answers to the questions of the session's last reply (its `questions`), "
        "by option or in words; they reach the model as question–answer lines, before "
        "`message`. Only with `sessionId`. A question or option that reply does not have is "
        "422 ANSWER_INVALID; answers when that reply asked no questions with `questions` "
        "(a final answer, or questions asked as plain text) are 409 ANSWER_STALE.",
    )
    model: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="The session's model, one of the deployment's LLM_MODELS (default: its "
        "LLM_MODEL); another is 400 VALIDATION_ERROR naming the allowed ones.",
    )
    max_tokens: Count | None = None
    disable_search: bool | None = None
    system_prompt: str | None = Field(None, description="Replaces the default expert persona.")
    output_format: Literal["text", "json"] | None = Field(
        None, description='"json": the final answer is valid JSON (questions stay text).'
    )
    output_schema: str | dict[str, Any] | None = Field(
        None,
        description="A JSON Schema the final JSON answer should follow (an object counts "
        "as its JSON text against the same length limit as a string).",
    )
    max_rounds: Count | None = Field(
        None,
        description="Rounds in the dialog (default 1: single-round mode). On a continuing "
        "request a different value changes the session's limit, like /rounds.",
    )
    session_id: str | None = Field(
        None,
        description="Continue this session (a UUID from an earlier response).",
        json_schema_extra={"format": "uuid", "pattern": UUID_PATTERN},
    )
    user_id: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_USER_ID_CHARS,
        pattern=USER_ID_PATTERN,
        description="Who the session is for, when starting one: the deployment then keeps "
        "client memory for this user (durable facts stated in completed sessions, offered "
        "to their later sessions; see `/api/users/{userId}/memory`). Without it nothing is "
        "remembered. Ignored when continuing a session.",
    )
    bot: (
        Annotated[int, Field(ge=0, le=MAX_SCOPE)]
        | Annotated[str, Field(pattern=BOT_REF_PATTERN)]
        | None
    ) = Field(
        None,
        description="The bot this request is for: a stored bot's id or `@username` "
        "(`consultation-bot bots list`); absent or 0: the deployment's own bot. The session "
        "runs with that bot's role or instruction, rounds, model and limits, and belongs to "
        "it: its `sessionId`, the `userId`'s memory and quotas and the `Idempotency-Key` "
        "are that bot's alone (read the session back with `?bot=`). A bot not stored, "
        "removed or disabled is 404 BOT_NOT_FOUND; nothing is stored.",
    )
    follow_up: bool = Field(
        False,
        description="Ask a follow-up question about the complete session `sessionId` names: "
        "answered directly (no clarifying round) with the whole session in view, and stored "
        "in it. At most FOLLOWUP_LIMIT per session, within SESSION_TTL_SECONDS of its last "
        "activity; otherwise 409 FOLLOW_UP_UNAVAILABLE with `reason`. Only with `sessionId` "
        "and a `message`; without it a complete session is DIALOG_COMPLETED.",
    )

    @field_validator("message", "model", "system_prompt", "output_schema")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        if isinstance(value, str) and "\x00" in value:  # PostgreSQL cannot store it in text
            raise ValueError("must not contain NUL (\\u0000)")
        return value

    @field_validator("session_id")
    @classmethod
    def _uuid(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not _UUID.fullmatch(value):
            raise ValueError("must be a UUID (8-4-4-4-12 hexadecimal digits)")
        return str(uuid.UUID(value))

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


class Citation(BaseModel):
    """A source the answer cites as `[index]` (from a search-backed provider)."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=1, description="The number the answer cites it by: `[1]` is 1.")
    url: str = Field(description="As the provider sent it; not necessarily http(s).")
    title: str | None = Field(None, exclude_if=_absent, description="One line, when known.")


class KnowledgeSourceOut(BaseModel):
    """A passage of the deployment's knowledge base the answer cites as `[ref]`."""

    model_config = ConfigDict(**_CAMEL, validate_by_name=True, extra="forbid")

    ref: str = Field(
        pattern="^K[0-9]+$", description='The label the answer cites it by: `[K1]` is "K1".'
    )
    document_id: int = Field(description="The knowledge base's document it is a passage of.")
    title: str = Field(description="The document's title, one line.")
    section: str = Field(
        description="The headings above the passage, joined by ` › ` "
        '("Warranty terms › Kettles"); empty when the document has none.'
    )
    page: int | None = Field(description="Its page in a PDF, from 1; null otherwise.")
    snippet: str = Field(description="The passage's beginning, one line of at most 200 characters.")


def knowledge_sources_of(sources: Sequence[KnowledgeSource]) -> list[KnowledgeSourceOut]:
    return [
        KnowledgeSourceOut(
            ref=s.ref,
            document_id=s.document_id,
            title=s.title,
            section=s.section,
            page=s.page,
            snippet=s.snippet,
        )
        for s in sources
    ]


class ToolCallOut(BaseModel):
    """One tool the model called before it wrote the reply, and what running it gave."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        description="The tool as the model called it: `<server>__<tool>` "
        '("time__get_current_time"), a server of the deployment\'s MCP_SERVERS.'
    )
    arguments: str = Field(description="The JSON text of the arguments the model wrote.")
    result: str = Field(
        description="What the tool answered, cut at TOOL_RESULT_MAX_CHARS; empty when it failed."
    )
    error: str | None = Field(
        description="Why it gave no result (a timeout, invalid arguments, the server gone, "
        "the tool's own error), in the words the model was sent; null when it answered."
    )
    ms: int = Field(ge=0, description="How long it ran, in milliseconds.")


def tool_calls_of(uses: Sequence[ToolUse]) -> list[ToolCallOut]:
    return [
        ToolCallOut(name=u.name, arguments=u.arguments, result=u.result, error=u.error, ms=u.ms)
        for u in uses
    ]


class QuestionOut(BaseModel):
    """One clarifying question and the answers it suggests (answer by number or in words)."""

    model_config = ConfigDict(extra="forbid")

    text: str
    options: list[str] = Field(description="Suggested answers, possibly none (1-based).")


def questions_of(round_: ClarifyingRound | None) -> list[QuestionOut]:
    if round_ is None:
        return []
    return [QuestionOut(text=q.text, options=list(q.options)) for q in round_.questions]


class ChatResponse(BaseModel):
    """One answered round; `content` is the assistant's reply.

    The six core fields (content, model, isComplete, round, maxRounds, sessionId) and
    `questions` and `readyForFinal` are always there; the others are additive and appear
    only when they say something.
    """

    model_config = ConfigDict(**_CAMEL, validate_by_name=True, extra="forbid")

    content: str
    model: str | None = None
    is_complete: bool
    round: int = Field(ge=1)
    max_rounds: int = Field(ge=1)
    session_id: str = Field(json_schema_extra={"format": "uuid"})
    questions: list[QuestionOut] = Field(
        description="The questions this reply asked, most important first, each with its "
        "suggested answers (`content` holds the same questions as text, without the "
        "options). Answer them with `answers`. Empty for a final answer, and for questions "
        "asked as plain text (only `content` has them then)."
    )
    ready_for_final: bool = Field(
        description="True when this final answer came because the model found it knew "
        "enough (it asked no more questions), not because the rounds ran out or it was asked."
    )
    truncated: bool = Field(
        default=False,
        exclude_if=_absent,
        description="Present (true) only when the model did not finish this reply: it was "
        "cut off by its token limit or a stream that ended early, even after the allowed "
        "continuations. `isComplete` still says whether the dialog is over.",
    )
    citations: list[Citation] = Field(
        default_factory=list,
        exclude_if=_absent,
        description="Present only when the provider named sources (e.g. Perplexity): the "
        "ones the answer's `[n]` markers refer to, by number, each URL once (at most 20).",
    )
    knowledge_sources: list[KnowledgeSourceOut] = Field(
        default_factory=list,
        exclude_if=_absent,
        description="Present only when a final answer or a follow-up's answer cites passages "
        "of the deployment's knowledge base: each passage it cites as `[K1]`, `[K2]`…, in "
        "label order. A passage it was given but does not cite is not listed, nor a label "
        "that names no passage it was given.",
    )
    tool_calls: list[ToolCallOut] = Field(
        default_factory=list,
        exclude_if=_absent,
        description="Present only when the model called tools (MCP_SERVERS) before it wrote "
        "this reply: each call in the order it ran, with its result or error. A failed "
        "call is listed too: the model was told why and wrote the reply without it.",
    )
    schema_valid: bool | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Present only with `outputFormat: json` and an `outputSchema` that is a "
        "JSON Schema object, on the final answer: whether its JSON follows the schema. The "
        "content is delivered either way; `false` means the model did not keep to it.",
    )
    transcript: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Present only when a voice note was sent: what was heard in it (the "
        "model was given this text).",
    )
    attachments_cut: int = Field(
        default=0,
        ge=0,
        exclude_if=_absent,
        description="Present only when documents were longer than MAX_DOCUMENT_CHARS "
        "(shared by one request's documents): how many characters were left out. The "
        "model was told the text was cut.",
    )
    attachments_incomplete: bool = Field(
        default=False,
        exclude_if=_absent,
        description="Present (true) only when a document was not read to its end (too "
        "many pages, paragraphs, table cells or characters): the model got its beginning "
        "and was told the rest was cut.",
    )
    images_not_seen: bool = Field(
        default=False,
        exclude_if=_absent,
        description="Present (true) only when the model refused the photos: it answered "
        "from the text alone and may ask for a description.",
    )
    follow_up: int = Field(
        default=0,
        ge=0,
        exclude_if=_absent,
        description="Present only on the answer to a follow-up (`followUp: true`): its "
        "number among the session's follow-ups, from 1.",
    )
    quota_reached: Limit | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Present only when a limit (the `userId`'s or this token's) was reached "
        "while the session was under way: this reply is its final answer (isComplete), "
        "counted as usual; the next session or follow-up is refused with QUOTA_EXCEEDED.",
    )
    follow_ups_left: int = Field(
        default=0,
        ge=0,
        exclude_if=_absent,
        description="Present only on a follow-up's answer while the session takes more "
        "follow-ups: how many it still takes (absent: none). A final answer takes up to "
        "FOLLOWUP_LIMIT.",
    )

    @classmethod
    def from_reply(cls, reply: Reply, read: MessageInput | None = None) -> ChatResponse:
        """The reply; `read` (the request's message as read) adds what was heard and cut."""
        return cls(
            transcript=read.transcript if read is not None else None,
            attachments_cut=read.omitted_chars if read is not None else 0,
            attachments_incomplete=read is not None
            and not all(document.complete for document in read.documents),
            images_not_seen=Notice.IMAGES_NOT_SEEN in reply.notices,
            content=reply.text,
            model=reply.model,
            is_complete=reply.is_complete,
            round=reply.round,
            max_rounds=reply.max_rounds,
            session_id=reply.consultation_id,
            questions=questions_of(reply.questions),
            ready_for_final=reply.model_ready,
            truncated=reply.truncated,
            citations=[Citation(index=s.index, url=s.url, title=s.title) for s in reply.sources],
            knowledge_sources=knowledge_sources_of(reply.knowledge_sources),
            tool_calls=tool_calls_of(reply.tool_uses),
            schema_valid=reply.schema_valid,
            follow_up=reply.follow_up,
            follow_ups_left=(reply.follow_ups_left or 0) if reply.follow_up else 0,
            quota_reached=reply.quota.limit if reply.quota is not None else None,
        )


class ErrorResponse(BaseModel):
    """Every error; `sessionId` appears on model errors so the round can be retried."""

    model_config = ConfigDict(**_CAMEL, validate_by_name=True, extra="forbid")

    error: str
    code: str = Field(json_schema_extra={"enum": list(STATUS)})
    session_id: str | None = Field(None, json_schema_extra={"format": "uuid"})
    problem: AttachmentProblem | None = Field(
        None,
        description="With ATTACHMENT_REFUSED: why the file was not taken. `too_large`: "
        "over `limit` bytes; `unsupported`: a kind no reader takes; `voice_off`/"
        "`vision_off`: this deployment takes no voice notes / photos; `unreadable`: broken "
        "or encrypted; `no_text`: nothing to read (a scan, silence); "
        "`transcription_failed`: the speech-to-text service failed (try again later); "
        "`too_costly`: reading the file took longer, or more memory, than a file may "
        "(DOCUMENT_READ_TIMEOUT_SECONDS, DOCUMENT_READ_MEMORY_MB).",
    )
    limit: int | None = Field(None, ge=1, description="With `too_large`: the limit in bytes.")
    name: str | None = Field(None, description="With ATTACHMENT_REFUSED: the file's name.")
    reason: FollowUpReason | None = Field(
        None,
        description="With FOLLOW_UP_UNAVAILABLE: why the session takes no follow-up. "
        "`not_complete`: no final answer yet; `expired`: idle past SESSION_TTL_SECONDS; "
        "`limit_reached`: FOLLOWUP_LIMIT follow-ups were asked; `disabled`: FOLLOWUP_LIMIT=0.",
    )
    quota: Limit | None = Field(
        None,
        description="With QUOTA_EXCEEDED: the limit reached. `api_daily_tokens`: this bearer "
        "token's API_DAILY_TOKEN_LIMIT; `user_daily_tokens`, `user_monthly_tokens`, "
        "`user_daily_consultations`: the `userId`'s person limits.",
    )
    resets_at: str | None = Field(
        None, description="With QUOTA_EXCEEDED: when the limit resets (ISO 8601, UTC)."
    )


class SessionMessage(BaseModel):
    """One message of a session: who wrote it, its text, when (ISO 8601, UTC), and for an
    assistant reply what the chat reply said of it (`questions`, `readyForFinal`,
    `knowledgeSources`, `toolCalls`)."""

    model_config = ConfigDict(**_CAMEL, validate_by_name=True, extra="forbid")

    role: Literal["user", "assistant"]
    text: str
    time: datetime
    questions: list[QuestionOut] = Field(
        description="The questions this reply asked, with their suggested answers, as its "
        "chat reply gave them in `questions`. Empty for a user message, a final answer, "
        "and questions asked as plain text."
    )
    ready_for_final: bool = Field(
        description="True on a final answer the model gave because it found it knew "
        "enough, as its chat reply said in `readyForFinal`; false on every other message."
    )
    knowledge_sources: list[KnowledgeSourceOut] = Field(
        default_factory=list,
        exclude_if=_absent,
        description="Present only on an answer that cites passages of the knowledge base: "
        "the ones its chat reply listed in `knowledgeSources`.",
    )
    tool_calls: list[ToolCallOut] = Field(
        default_factory=list,
        exclude_if=_absent,
        description="Present only on a reply written after calling tools: the calls its chat "
        "reply listed in `toolCalls`.",
    )

    @classmethod
    def of(cls, message: Message) -> SessionMessage:
        return cls(
            role=message.role.value,
            text=message.text,
            time=datetime.fromtimestamp(message.created_at, UTC),
            questions=questions_of(message.questions),
            ready_for_final=message.ready_for_final,
            knowledge_sources=knowledge_sources_of(message.knowledge_sources),
            tool_calls=tool_calls_of(message.tool_uses),
        )


class MemoryFactOut(BaseModel):
    """A fact the deployment remembers about a user."""

    model_config = ConfigDict(**_CAMEL, validate_by_name=True, extra="forbid")

    id: int = Field(ge=1, description="Deletes it: `DELETE /api/users/{userId}/memory/{id}`.")
    text: str
    created_at: datetime


class MemoryView(BaseModel):
    """`GET /api/users/{userId}/memory`: the user's remembered facts, newest first."""

    model_config = ConfigDict(**_CAMEL, validate_by_name=True, extra="forbid")

    user_id: str
    facts: list[MemoryFactOut]

    @classmethod
    def of(cls, user_id: str, facts: Sequence[Fact]) -> MemoryView:
        return cls(
            user_id=user_id,
            facts=[
                MemoryFactOut(
                    id=f.id, text=f.text, created_at=datetime.fromtimestamp(f.created_at, UTC)
                )
                for f in facts
            ],
        )


class SessionView(BaseModel):
    """`GET /api/sessions/{id}`: where a session stands, to resume after a lost reply.

    A last message from the user means its round is still unanswered: send it again
    (with the same `Idempotency-Key`) to get the answer.
    """

    model_config = ConfigDict(**_CAMEL, validate_by_name=True, extra="forbid")

    session_id: str = Field(json_schema_extra={"format": "uuid"})
    status: Literal["active", "complete", "expired", "reset"]
    round: int = Field(ge=0, description="Rounds answered so far.")
    max_rounds: int = Field(ge=1)
    is_complete: bool
    messages: list[SessionMessage]

    @classmethod
    def from_consultation(cls, consultation: Consultation) -> SessionView:
        return cls(
            session_id=consultation.id,
            status=consultation.status.value,
            round=consultation.current_round,
            max_rounds=consultation.max_rounds,
            is_complete=consultation.status is Status.COMPLETE,
            messages=[SessionMessage.of(m) for m in consultation.messages],
        )


class StreamSession(BaseModel):
    """The stream's first event: the session this round belongs to (resume with it)."""

    model_config = ConfigDict(**_CAMEL, validate_by_name=True, extra="forbid")

    session_id: str = Field(json_schema_extra={"format": "uuid"})


class StreamText(BaseModel):
    """`delta`: text to append; `snapshot`: the whole text so far, replacing what was shown."""

    model_config = ConfigDict(extra="forbid")

    content: str


class StreamTool(BaseModel):
    """`tool`: a tool the model called starts running (the reply's text goes on after it;
    the `done` reply lists every call in `toolCalls`)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The tool as the model called it: `<server>__<tool>`.")
    server: str = Field(
        description="Its server's name in MCP_SERVERS (`knowledge` for the "
        "knowledge base's search)."
    )
    tool: str = Field(description="The tool's own name at its server.")


class StreamError(ErrorResponse):
    """The stream's last event when the round failed after it opened."""

    status: int = Field(description="The HTTP status `/api/chat` would have answered with.")


class ToolServerOut(BaseModel):
    """One tool server of MCP_SERVERS, as `/healthz` reports it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Its name in MCP_SERVERS.")
    state: Literal["starting", "ready", "restarting", "failed"] = Field(
        description="`ready`: its tools are offered; `starting`: not yet; `restarting`: it "
        "died and is started again after a back-off; `failed`: it could not start or list "
        "its tools (consultations go on without them)."
    )
    tools: int = Field(
        ge=0, description="How many tools it offers the model (after MCP_TOOLS_ALLOW)."
    )
    error: str | None = Field(description="Its last failure, one line; null when none.")


class HealthResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["ok", "unavailable"]
    store: bool
    model: str | None
    loops: dict[str, str] = Field(
        description='Each long-lived loop of the process: "ok", or why it is not doing its job'
        " (ended, stuck, or no progress for longer than it allows)."
    )
    tools: list[ToolServerOut] = Field(
        description="Each configured tool server (MCP_SERVERS), empty without any. A server "
        "that is down does not make `status` unavailable: consultations go on without its "
        "tools."
    )


def parse_chat_request(raw: bytes | bytearray) -> ChatRequest:
    """Validate a request body; raise `ApiError` with the code the first problem deserves."""
    try:
        body = ChatRequest.model_validate_json(raw)
    except ValidationError as exc:
        raise _api_error(exc) from None
    if not body.message.strip() and not body.attachments and not body.answers:
        missing = "message" not in body.model_fields_set
        raise ApiError(
            "VALIDATION_ERROR", f"message: {'is required' if missing else 'must not be blank'}"
        )
    if body.answers and body.session_id is None:
        raise ApiError(
            "VALIDATION_ERROR",
            "answers: only with a sessionId (they answer that session's last questions)",
        )
    if body.follow_up and body.session_id is None:
        raise ApiError(
            "VALIDATION_ERROR", "followUp: only with a sessionId (the session asked about)"
        )
    if body.follow_up and body.answers:
        raise ApiError("VALIDATION_ERROR", "followUp: not with answers (a follow-up asks no round)")
    return body


def _api_error(exc: ValidationError) -> ApiError:
    error = exc.errors(include_url=False)[0]
    kind, loc = error["type"], error["loc"]
    if kind == "json_invalid":
        return ApiError("VALIDATION_ERROR", "the body is not valid JSON")
    if not loc:
        return ApiError("VALIDATION_ERROR", "the body must be a JSON object")
    field = str(loc[0]) if loc[0] != "answers" else _path(loc)
    message = str(error["msg"]).removeprefix("Value error, ")
    code = "INVALID_MAX_ROUNDS" if field == "maxRounds" else "VALIDATION_ERROR"
    if kind == "missing":
        message = "is required"
    return ApiError(code, f"{field}: {message}")


def _path(loc: tuple[int | str, ...]) -> str:
    """`("answers", 0, "option")` → `answers[0].option` (a model's own rule has no field)."""
    path = str(loc[0])
    for part in loc[1:]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path
