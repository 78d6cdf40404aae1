"""Round arithmetic of a consultation, as pure functions.

Invariants: `current_round` counts *answered* rounds; the round being answered
(a `NextRound`) is round `current_round + 1`; it is final when it reaches `max_rounds` (which may
have been lowered below the rounds already used) or when the user asked for the
final answer. A failed model call changes nothing here: the round is consumed
only by `after_reply`.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.domain.consultation import Consultation, Message, Role, Status


@dataclass(frozen=True, slots=True)
class NextRound:
    """The round about to be answered."""

    round: int
    max_rounds: int
    is_final: bool
    final_requested: bool  # the user asked for the answer before the last round
    model_ready: bool = False  # the model found it knew enough: its final answer now

    @property
    def rounds_left(self) -> int:
        return max(self.max_rounds - self.round, 0)


def plan_round(consultation: Consultation, *, final_requested: bool = False) -> NextRound:
    """Which round answers the open turn, and whether its reply must be the final answer."""
    round_number = consultation.current_round + 1
    reached_limit = round_number >= consultation.max_rounds
    return NextRound(
        round=round_number,
        max_rounds=consultation.max_rounds,
        is_final=reached_limit or final_requested,
        final_requested=final_requested and not reached_limit,
    )


def ready_round(next_round: NextRound) -> NextRound:
    """`next_round` answered with the final answer because the model said it knew enough."""
    return NextRound(
        next_round.round,
        next_round.max_rounds,
        is_final=True,
        final_requested=False,
        model_ready=True,
    )


def is_expired(consultation: Consultation, *, now: float, ttl_seconds: float) -> bool:
    """An active consultation idle for longer than the TTL."""
    return (
        consultation.status is Status.ACTIVE and now - consultation.last_activity_at > ttl_seconds
    )


def is_duplicate_of_open_turn(consultation: Consultation, text: str, author: str | None) -> bool:
    """The same text from the same author is already the open turn's last message.

    That is a resend after a failure (or a double tap): it must not be stored twice.
    """
    waiting = consultation.open_turn
    if not waiting:
        return False
    last = waiting[-1]
    return last.text == text and last.author == author


def append_user_message(consultation: Consultation, message: Message) -> None:
    """Add a user message to the open turn (several messages may form one turn)."""
    consultation.messages.append(message)
    consultation.last_activity_at = message.created_at


def after_reply(
    consultation: Consultation, next_round: NextRound, reply: Message, *, early_finish: bool
) -> None:
    """Consume the round: record the reply, advance, and complete when it was the answer."""
    consultation.messages.append(reply)
    consultation.current_round = next_round.round
    consultation.last_activity_at = reply.created_at
    if next_round.is_final or early_finish:
        consultation.status = Status.COMPLETE


def validate_max_rounds(value: int, *, limit: int) -> bool:
    return 1 <= value <= limit


def has_open_turn(consultation: Consultation) -> bool:
    return bool(consultation.messages) and consultation.messages[-1].role is Role.USER
