"""Answers to a consultation's structured round: which round they answer, and the user's
message they make.

Invariants:
- an answer refers to the round its consultation asked last (the questions of its last
  reply, `asked_round`); one naming another consultation, an older round, or a round
  that asked no structured questions is `AnswerStale` and stores nothing;
- picks (options chosen one press at a time) count only for the round they were made
  in (`live_picks`): once the consultation moved on they are never used;
- the message they make is `core.domain.clarifying.answers_text`: the picks, then the answers
  given with the message (a later answer to the same question wins), then the typed text.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.domain.asking import RoundRef
from core.domain.clarifying import Answer, ClarifyingRound, Picks, answers_text
from core.domain.consultation import Consultation, Role
from core.domain.errors import AnswerInvalid, AnswerStale
from core.turns.user_turns import require_text


def asked_round(consultation: Consultation) -> ClarifyingRound | None:
    """The structured questions of the consultation's last reply (None: it has no reply
    yet, or its last one was a final answer or a round asked in text)."""
    for message in reversed(consultation.messages):
        if message.role is Role.ASSISTANT:
            return message.questions
    return None


def live_picks(consultation: Consultation) -> Picks | None:
    """The consultation's picks when they were made for its current round."""
    picks = consultation.picks
    if picks is None or picks.round != consultation.current_round or not picks.answers:
        return None
    return picks


def round_for(consultation: Consultation | None, ref: RoundRef | None) -> ClarifyingRound:
    """The round `ref` answers (the consultation's current one when `ref` is None), or
    `AnswerStale`."""
    if consultation is None:
        raise AnswerStale("there is no consultation to answer")
    if ref is not None and not ref.names(consultation):
        raise AnswerStale("the questions answered are no longer the current ones")
    found = asked_round(consultation)
    if found is None:
        raise AnswerStale("the last reply asked no structured questions to answer")
    return found


def picked(
    consultation: Consultation | None, ref: RoundRef, question: int, option: int, by: str | None
) -> tuple[ClarifyingRound, Picks]:
    """The round `ref` names and the consultation's picks with option `option` of
    `question` toggled (see `Picks.toggled`); `AnswerStale` or `AnswerInvalid` when the
    press names what the current round does not have."""
    found = round_for(consultation, ref)
    assert consultation is not None  # round_for raised otherwise
    if not 1 <= question <= len(found.questions):
        raise AnswerInvalid(f"there is no question {question}")
    if not 1 <= option <= len(found.questions[question - 1].options):
        raise AnswerInvalid(f"question {question} has no option {option}")
    picks = live_picks(consultation) or Picks(consultation.current_round)
    return found, picks.toggled(question, option, by)


def user_message_text(
    consultation: Consultation | None,
    typed: str,
    answers: Sequence[Answer],
    *,
    author: str | None,
    ref: RoundRef | None = None,
) -> tuple[str, bool]:
    """The user's message made of the picks, `answers` and `typed`, and whether picks were
    used (the caller clears them once the message is stored); `EmptyMessage` when that makes
    nothing. Without picks, answers or a `ref` it is `typed` as it is (the caller has
    refused a blank one before waiting for the chat)."""
    picks = live_picks(consultation) if consultation is not None else None
    if picks is None and not answers and ref is None:
        return typed, False
    found = round_for(consultation, ref)
    given = (*(picks.answers if picks is not None else ()), *answers)
    text = require_text(answers_text(found, given, typed, author=author))
    return text, picks is not None
