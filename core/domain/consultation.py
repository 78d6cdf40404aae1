"""Domain values of a consultation.

Plain dataclasses: identity and persistence are the store's concern. A
consultation's messages are ordered; a trailing user message with no assistant
reply after it is the *open turn* of round ``current_round + 1``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from core.domain.clarifying import ClarifyingRound, Picks
from core.domain.knowledge_sources import KnowledgeSource
from core.domain.tools import ToolUse


class Status(enum.StrEnum):
    ACTIVE = "active"
    COMPLETE = "complete"
    RESET = "reset"
    EXPIRED = "expired"


class Role(enum.StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one or more model calls; `estimated` when any part was counted by
    `core.domain.tokens` because the provider reported none (a sum is as exact as its least
    exact part)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.estimated or other.estimated,
        )


@dataclass(slots=True)
class Message:
    role: Role
    text: str
    created_at: float
    author: str | None = None
    usage: Usage | None = None
    # The update a user message came from (`tg:<update_id>`): handling that update a
    # second time finds this turn (`TurnRecord`) instead of storing it again.
    turn_id: str | None = None
    # An assistant reply asking structured questions: what it asked (its `text` is the
    # round's text), so an answer by option refers to the stored round.
    questions: ClarifyingRound | None = None
    # A final answer the model gave because its round said it knew enough (`ready_for_final`),
    # kept so a replay and a session's history say so as the reply did.
    ready_for_final: bool = False
    # A final answer's or a follow-up's: the knowledge-base passages it cited, kept so
    # history, exports and a session's messages list them as the reply did.
    knowledge_sources: tuple[KnowledgeSource, ...] = ()
    # An assistant reply's: the tools it called before it was written (`core.domain.tools`),
    # kept so the context, history, exports and a session's messages show them.
    tool_uses: tuple[ToolUse, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """Per-consultation model parameters (the API sets them per session)."""

    model: str | None = None
    max_tokens: int | None = None
    disable_search: bool | None = None
    output_format: str | None = None  # None (text) or "json"
    output_schema: str | None = None


@dataclass(slots=True)
class Consultation:
    id: str
    chat_key: str
    max_rounds: int
    initial_request: str
    created_at: float
    last_activity_at: float
    current_round: int = 0  # completed rounds
    status: Status = Status.ACTIVE
    role: str | None = None
    system_prompt: str | None = None
    started_by: int | None = None  # the user who opened it (group admin rules)
    options: ModelOptions = field(default_factory=ModelOptions)
    messages: list[Message] = field(default_factory=list)
    picks: Picks | None = None  # options chosen for the last round's questions, not yet sent
    # Whose client memory it uses (`core.domain.facts.MemoryScope.owner`), set when it starts;
    # None: no memory (memory off, or an API session without a userId).
    memory_owner: str | None = None
    # The owner's facts as read when it started, newest first (what its prompts show).
    memory_facts: tuple[str, ...] = ()
    # Follow-ups answered after the final answer (`core.turns.follow_ups`); they use no round.
    follow_ups: int = 0
    # Who asked, as quotas and the console's people name them (`tg:<user id>`,
    # `api:<userId>`, the terminal's `console:local`), recorded when it starts; None:
    # not known (an API session without a userId, an anonymous group admin).
    person: str | None = None

    @property
    def open_turn(self) -> list[Message]:
        """User messages after the last assistant reply: the turn not yet answered."""
        turn: list[Message] = []
        for message in reversed(self.messages):
            if message.role is Role.ASSISTANT:
                break
            turn.append(message)
        turn.reverse()
        return turn


SUMMARY_CHARS = 200
"""How much of a consultation's request its summary keeps."""


@dataclass(frozen=True, slots=True)
class ConsultationSummary:
    """A consultation as a chat's history lists it: no messages, the start of its request
    (at most `SUMMARY_CHARS` characters), where it stands."""

    id: str
    created_at: float
    last_activity_at: float
    request: str
    status: Status
    current_round: int
    max_rounds: int


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """A user message found by its turn id, and where its turn stands.

    `reply` is the first assistant message after it (the reply that answered its turn,
    together with any messages sent with it) and `round` the round that reply answered;
    both None while the turn is unanswered.
    """

    consultation: Consultation  # whatever its status, messages included
    message: Message
    reply: Message | None = None
    round: int | None = None


def locate_turn(consultation: Consultation, turn_id: str) -> TurnRecord | None:
    """The user message of `consultation` stored with `turn_id`, and its reply if any.

    Each reply consumes one round, so the round a reply answered is its position among
    the assistant messages; a reply after the final answer (a follow-up's, whose round
    is past `current_round`) used no round.
    """
    message: Message | None = None
    answered = 0
    for candidate in consultation.messages:
        if candidate.role is Role.ASSISTANT:
            answered += 1
            if message is not None:
                return TurnRecord(consultation, message, candidate, answered)
        elif message is None and candidate.turn_id == turn_id:
            message = candidate
    return None if message is None else TurnRecord(consultation, message)


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """What a chat chose with /rounds, /role and /model; None means the deployment default."""

    max_rounds: int | None = None
    role: str | None = None
    system_prompt: str | None = None
    language: str | None = None
    model: str | None = None  # read against LLM_MODELS when used: it may have been removed
