"""Domain values of a consultation.

Plain dataclasses: identity and persistence are the store's concern. A
consultation's messages are ordered; a trailing user message with no assistant
reply after it is the *open turn* of round ``current_round + 1``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


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
    `core.tokens` because the provider reported none (a sum is as exact as its least
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


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """What a chat chose with /rounds and /role; None means the deployment default."""

    max_rounds: int | None = None
    role: str | None = None
    system_prompt: str | None = None
    language: str | None = None
