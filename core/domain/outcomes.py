"""What the engine hands back to an edge (bot, HTTP API) after each action."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from core.domain.clarifying import ClarifyingRound
from core.domain.consultation import Status, TurnRecord, Usage
from core.domain.knowledge_sources import KnowledgeSource
from core.domain.quotas import QuotaHit
from core.domain.sources import Source, extract_sources
from core.domain.tools import ToolUse


class Notice(enum.StrEnum):
    PREVIOUS_EXPIRED = "previous_expired"  # an idle consultation expired; this one is new
    STARTED = "started"  # this message started a new consultation
    ANSWER_INCOMPLETE = "answer_incomplete"  # still cut off after the allowed continuations
    # The user's images were refused by the model (it takes text only): the reply was
    # written without seeing them.
    IMAGES_NOT_SEEN = "images_not_seen"
    # The person reached a quota while this consultation was under way: this reply is its
    # final answer (`Reply.quota` names the limit).
    QUOTA_FINAL = "quota_final"


@dataclass(frozen=True, slots=True)
class Reply:
    """One assistant reply, ready to show."""

    text: str
    consultation_id: str
    round: int
    max_rounds: int
    is_final: bool  # this reply is the consultation's answer
    is_complete: bool  # the consultation is over after it
    model: str
    usage: Usage = field(default_factory=Usage)
    notices: frozenset[Notice] = frozenset()
    extras: dict[str, Any] = field(default_factory=dict)
    json_valid: bool | None = None
    # With an output schema (`core.domain.json_answer`): whether the final JSON follows it.
    schema_valid: bool | None = None
    # Handed back from the store for a turn handled a second time (`replay_of`): the
    # model was not called and nothing was stored.
    replayed: bool = False
    # A question round asked as a structured reply: its questions and their options
    # (`text` is the round's text). None for a final answer and a round asked in text.
    questions: ClarifyingRound | None = None
    # A final answer the model gave because it found it knew enough (no marker, no
    # request from the user): its structured round said `ready_for_final`.
    model_ready: bool = False
    # A follow-up's answer (`core.turns.follow_ups`): its number among the consultation's
    # follow-ups, 1-based (0: not a follow-up).
    follow_up: int = 0
    # How many follow-ups the consultation may still take after this reply (0 for a
    # round, when they are off, or when every one was asked). None: not said (a stored
    # answer sent again), taken as some remaining, as `bot.transport.keyboards` offers them then.
    follow_ups_left: int | None = None
    # The limit the person reached while the consultation was under way, which made this
    # reply its final answer (`Notice.QUOTA_FINAL`); None otherwise.
    quota: QuotaHit | None = None
    # A final answer's or a follow-up's: the knowledge-base passages it cites
    # (`core.domain.knowledge_sources`), in label order; empty for a round.
    knowledge_sources: tuple[KnowledgeSource, ...] = ()
    # The tools the model called for this reply, in the order they ran (`core.domain.tools`).
    tool_uses: tuple[ToolUse, ...] = ()

    @property
    def completed_now(self) -> bool:
        """This reply completed its consultation: not a stored reply handed back again, not
        the answer to a follow-up (client memory notes a consultation once, here)."""
        return self.is_complete and not self.replayed and not self.follow_up

    @property
    def early_finish(self) -> bool:
        return self.is_final and self.round < self.max_rounds

    @property
    def truncated(self) -> bool:
        """The model did not finish this reply (cut off by its token limit, a stream that
        just ended, a content filter or the answer cap), even after the continuations."""
        return Notice.ANSWER_INCOMPLETE in self.notices

    @property
    def sources(self) -> tuple[Source, ...]:
        """What a search-backed provider cited for this reply (see `core.domain.sources`)."""
        return extract_sources(self.extras)


def replay_of(record: TurnRecord, *, model: str) -> Reply:
    """The stored reply of an answered turn, as the `Reply` it was (`replayed`).

    It was final, and the consultation complete after it, exactly when the consultation
    is COMPLETE and this reply answered its last round: a final reply completes the
    consultation, while a reply the consultation went on from was a question round. A
    reply past the last round answered a follow-up (`follow_up` is its number; it shows
    the final round). `max_rounds` is the consultation's limit now (never below the
    round). Its questions, whether the model found it knew enough, the knowledge-base
    sources it cited and the tools it called come back as stored. What the store does
    not keep comes back empty: notices, provider extras (sources), JSON validity, how
    many follow-ups remain;
    `model` is the one the consultation asks for.
    """
    reply, consultation = record.reply, record.consultation
    if reply is None or record.round is None:
        raise ValueError("only an answered turn can be replayed")
    complete = consultation.status is Status.COMPLETE
    final = complete and record.round >= consultation.current_round
    follow_up = record.round - consultation.current_round if final else 0
    shown = record.round - follow_up
    return Reply(
        text=reply.text,
        consultation_id=consultation.id,
        round=shown,
        max_rounds=max(consultation.max_rounds, shown),
        is_final=final,
        is_complete=final,
        model=model,
        usage=reply.usage or Usage(),
        replayed=True,
        questions=reply.questions,
        model_ready=reply.ready_for_final,
        follow_up=follow_up,
        knowledge_sources=reply.knowledge_sources,
        tool_uses=reply.tool_uses,
    )


@dataclass(frozen=True, slots=True)
class StatusInfo:
    """Where a chat stands, for /status."""

    max_rounds: int
    role: str
    active: bool
    model: str = ""  # the model of the chat's next call
    rounds_done: int = 0
    open_turn: bool = False  # a message is waiting for an answer (after a failure)
    answering: bool = False  # a reply to the open turn is being written right now
    initial_request: str | None = None
    last_activity_at: float | None = None
    started_by: int | None = None


@dataclass(frozen=True, slots=True)
class ChatModel:
    """The model of a chat's next consultation; `removed`: the model the chat chose,
    which LLM_MODELS no longer names (the deployment's is used instead)."""

    model: str
    removed: str | None = None


@dataclass(frozen=True, slots=True)
class RoundsChange:
    max_rounds: int
    active: bool
    rounds_done: int
    next_is_final: bool
