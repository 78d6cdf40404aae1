"""A consultation as its transcript page shows it: the request with what was attached,
each round's questions with their options and the answers chosen, the final answer,
follow-ups, the tools each reply called (arguments, result or error, time), and the
tokens stored with the replies.

Pure: built from a stored `Consultation` (`core.turns.transcript` gives the parts in order).
Document bodies are not shown, only their names; every text is bounded by
`core.turns.transcript.MAX_PART_CHARS`, a tool's result by `core.domain.tool_uses.RESULT_CHARS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.domain.attachments import document_names, without_document_bodies
from core.domain.clarifying import ClarifyingRound, answers_read, chosen_option, option_label
from core.domain.consultation import Consultation, Role, Usage
from core.domain.tool_uses import result_text, shown_name
from core.domain.tools import ToolUse
from core.turns.transcript import RoundPart, Transcript, transcript_of


@dataclass(frozen=True, slots=True)
class OptionView:
    label: str
    text: str
    chosen: bool


@dataclass(frozen=True, slots=True)
class QuestionView:
    text: str
    options: tuple[OptionView, ...]
    answer: str | None  # the value answered for this question, as stored


@dataclass(frozen=True, slots=True)
class ToolView:
    """One tool call as the operator reads it: which tool, the arguments the model wrote,
    what it gave (`result`, or `error` and why: `failure`) and how long it ran."""

    name: str  # "server · tool"
    called: str  # as the model called it
    arguments: str
    result: str
    error: str | None
    failure: str
    ms: int


def tools_of(uses: tuple[ToolUse, ...]) -> tuple[ToolView, ...]:
    return tuple(
        ToolView(
            shown_name(u),
            u.name,
            u.arguments,
            "" if u.error is not None else result_text(u),
            u.error,
            "" if u.failure is None else u.failure.value,
            u.ms,
        )
        for u in uses
    )


@dataclass(frozen=True, slots=True)
class FollowUpView:
    question: str
    answer: str | None
    tools: tuple[ToolView, ...]


@dataclass(frozen=True, slots=True)
class RoundView:
    number: int
    preamble: str  # a structured round's preamble, or the whole text of a round in text
    questions: tuple[QuestionView, ...]
    answer: str | None  # the user's messages after it, joined (None: unanswered)
    attachments: tuple[str, ...]
    tools: tuple[ToolView, ...] = ()  # the tools the round's reply called


@dataclass(frozen=True, slots=True)
class TranscriptView:
    transcript: Transcript
    request: str
    attachments: tuple[str, ...]
    rounds: tuple[RoundView, ...]
    follow_ups: tuple[FollowUpView, ...]
    final_tools: tuple[ToolView, ...]
    usage: Usage
    replies_counted: int
    replies: int


def view_of(consultation: Consultation) -> TranscriptView:
    t = transcript_of(consultation)
    counted = [m.usage for m in consultation.messages if m.role is Role.ASSISTANT and m.usage]
    usage = sum(counted, Usage())
    replies = sum(1 for m in consultation.messages if m.role is Role.ASSISTANT)
    return TranscriptView(
        transcript=t,
        request=without_document_bodies(t.request),
        attachments=tuple(document_names(t.request)),
        rounds=tuple(_round(n, part) for n, part in enumerate(t.rounds, 1)),
        follow_ups=tuple(
            FollowUpView(without_document_bodies(f.question), f.answer, tools_of(f.tools))
            for f in t.follow_ups
        ),
        final_tools=tools_of(t.final_tools),
        usage=usage,
        replies_counted=len(counted),
        replies=replies,
    )


def _round(number: int, part: RoundPart) -> RoundView:
    answer = part.answer
    found: ClarifyingRound | None = part.questions
    if found is None or not found.questions:
        questions: tuple[QuestionView, ...] = ()
        preamble = part.asked
    else:
        values = answers_read(found, answer or "")
        questions = tuple(
            QuestionView(
                q.text,
                tuple(
                    OptionView(option_label(n, i), text, chosen_option(q, values.get(n, "")) == i)
                    for i, text in enumerate(q.options, 1)
                ),
                values.get(n),
            )
            for n, q in enumerate(found.questions, 1)
        )
        preamble = found.preamble
    return RoundView(
        number,
        preamble,
        questions,
        None if answer is None else without_document_bodies(answer),
        tuple(document_names(answer or "")),
        tools_of(part.tools),
    )
