"""Round arithmetic: pure functions, no I/O."""

from __future__ import annotations

import pytest

from core.domain.consultation import Consultation, Message, Role, Status
from core.prompting.rounds import (
    after_reply,
    append_user_message,
    has_open_turn,
    is_duplicate_of_open_turn,
    is_expired,
    plan_round,
    validate_max_rounds,
)


def make(max_rounds: int, *, answered: int = 0, now: float = 1000.0) -> Consultation:
    consultation = Consultation(
        id="c1",
        chat_key="k",
        max_rounds=max_rounds,
        initial_request="question",
        created_at=now,
        last_activity_at=now,
        messages=[Message(Role.USER, "question", now)],
    )
    for index in range(answered):
        next_round = plan_round(consultation)
        after_reply(
            consultation, next_round, Message(Role.ASSISTANT, f"a{index}", now), early_finish=False
        )
        append_user_message(consultation, Message(Role.USER, f"u{index}", now))
    return consultation


def play(max_rounds: int) -> list[tuple[int, bool]]:
    """Answer rounds until the consultation completes; return (round, is_final) per turn."""
    consultation = make(max_rounds)
    seen = []
    while consultation.status is Status.ACTIVE:
        next_round = plan_round(consultation)
        seen.append((next_round.round, next_round.is_final))
        after_reply(consultation, next_round, Message(Role.ASSISTANT, "r", 0), early_finish=False)
        if consultation.status is Status.ACTIVE:
            append_user_message(consultation, Message(Role.USER, "more", 0))
    return seen


@pytest.mark.parametrize("max_rounds", [1, 2, 3, 10])
def test_consultation_runs_exactly_n_rounds_and_only_the_last_is_final(max_rounds: int) -> None:
    """N rounds are answered; only round N is final; then the consultation is complete."""
    seen = play(max_rounds)
    assert [number for number, _ in seen] == list(range(1, max_rounds + 1))
    assert [final for _, final in seen] == [False] * (max_rounds - 1) + [True]


def test_single_round_mode_first_reply_is_final() -> None:
    """With N = 1 the first reply is already the final answer."""
    next_round = plan_round(make(1))
    assert (next_round.round, next_round.is_final, next_round.final_requested) == (1, True, False)


def test_final_requested_early_is_final_and_flagged() -> None:
    """Asking for the answer in round 1 of 3 makes that round final and marks it as requested."""
    next_round = plan_round(make(3), final_requested=True)
    assert next_round.is_final and next_round.final_requested and next_round.round == 1


def test_final_requested_on_last_round_is_just_the_last_round() -> None:
    """A request for the answer in the last round is the ordinary final round."""
    next_round = plan_round(make(3, answered=2), final_requested=True)
    assert next_round.is_final and not next_round.final_requested


@pytest.mark.parametrize(("answered", "new_limit"), [(2, 2), (3, 2), (2, 1), (5, 3)])
def test_lowering_the_limit_to_rounds_already_used_makes_the_next_round_final(
    answered: int, new_limit: int
) -> None:
    """If N or more rounds are used when the limit drops to N, the next message gets the answer."""
    consultation = make(10, answered=answered)
    consultation.max_rounds = new_limit
    assert plan_round(consultation).is_final


def test_raising_the_limit_mid_way_gives_more_rounds() -> None:
    """Raising N in round 2 of 3 to 5 makes round 3 non-final."""
    consultation = make(3, answered=2)
    consultation.max_rounds = 5
    next_round = plan_round(consultation)
    assert next_round.round == 3 and not next_round.is_final and next_round.rounds_left == 2


def test_early_finish_completes_before_the_limit() -> None:
    """A reply marked as the final answer in round 1 of 3 completes the consultation."""
    consultation = make(3)
    next_round = plan_round(consultation)
    after_reply(
        consultation, next_round, Message(Role.ASSISTANT, "full answer", 5), early_finish=True
    )
    assert consultation.status is Status.COMPLETE and consultation.current_round == 1


def test_failure_does_not_consume_the_round() -> None:
    """Planning a round consumes nothing: until a reply is recorded (a failed model call
    records none), the same round is planned again and the turn stays open."""
    consultation = make(3, answered=1)
    assert plan_round(consultation).round == 2
    assert has_open_turn(consultation)
    assert plan_round(consultation).round == 2


def test_identical_resend_is_recognised_and_a_new_message_joins_the_turn() -> None:
    """The same text by the same author is a duplicate; other text joins the open turn."""
    consultation = make(3)
    assert is_duplicate_of_open_turn(consultation, "question", None)
    assert not is_duplicate_of_open_turn(consultation, "question", "Bob")
    append_user_message(consultation, Message(Role.USER, "and also this", 2000))
    assert [m.text for m in consultation.open_turn] == ["question", "and also this"]
    assert consultation.last_activity_at == 2000
    assert plan_round(consultation).round == 1


def test_no_duplicate_without_an_open_turn() -> None:
    """After a reply nothing is open, so no message counts as a resend."""
    consultation = make(3)
    after_reply(
        consultation, plan_round(consultation), Message(Role.ASSISTANT, "q?", 1), early_finish=False
    )
    assert not is_duplicate_of_open_turn(consultation, "question", None)


@pytest.mark.parametrize(("idle", "expired"), [(3599, False), (3600, False), (3601, True)])
def test_expiry_after_ttl(idle: float, expired: bool) -> None:
    """A consultation expires only when idle strictly longer than the TTL."""
    consultation = make(3, now=0)
    assert is_expired(consultation, now=idle, ttl_seconds=3600) is expired


def test_finished_consultations_never_expire() -> None:
    """Expiry concerns active consultations only."""
    consultation = make(1, now=0)
    consultation.status = Status.COMPLETE
    assert not is_expired(consultation, now=10**9, ttl_seconds=1)


@pytest.mark.parametrize(
    ("value", "ok"), [(0, False), (-1, False), (1, True), (10, True), (11, False)]
)
def test_round_limit_validation(value: int, ok: bool) -> None:
    """Rounds must lie within 1..ceiling."""
    assert validate_max_rounds(value, limit=10) is ok
