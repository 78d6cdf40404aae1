"""A consultation as a document to keep: its parts in order, and their Markdown.

Invariants: `transcript_of` is pure and total — any consultation gives a transcript,
never an error; its parts follow the stored messages in order: the request (the first
user turn), then each clarifying round (what the bot asked, then the user's answer, None
while unanswered), then the final answer, which only a COMPLETE consultation has (the
reply to its last round), then the follow-ups asked after it (each question, then its
answer, None while unanswered). Sources are part of a reply's text when the model
wrote them there: the store keeps no provider citations, so nothing is added. Labels
are English, or Russian for a consultation written in Russian. Each text is cut at
`MAX_PART_CHARS`, so a document costs at most a bounded amount whatever was stored, and
a lone surrogate becomes U+FFFD, so every text encodes as UTF-8. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from core.clarifying import ClarifyingRound, option_lines
from core.follow_ups import FollowUpPart, final_index, follow_up_parts
from core.language import written_language
from core.models import Consultation, Message, Role

MAX_TITLE_CHARS = 80
MAX_PART_CHARS = 100_000
"""Longest text a part keeps (a stored reply is far shorter: `max_answer_chars`)."""

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "date": "Date",
        "request": "Request",
        "round": "Clarifying round {number}",
        "questions": "Questions",
        "answer": "Answer",
        "no_answer": "(not answered)",
        "final": "Final answer",
        "untitled": "Consultation",
        "options": "Options",
        "follow_ups": "Follow-up questions",
        "follow_up": "Follow-up {number}",
    },
    "ru": {
        "date": "Дата",
        "request": "Запрос",
        "round": "Уточняющий раунд {number}",
        "questions": "Вопросы",
        "answer": "Ответ",
        "no_answer": "(без ответа)",
        "final": "Итоговый ответ",
        "untitled": "Консультация",
        "options": "Варианты",
        "follow_ups": "Дополнительные вопросы",
        "follow_up": "Дополнительный вопрос {number}",
    },
}
"""Document labels by language code; English for any other."""

_SPACE = re.compile(r"\s+")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class RoundPart:
    """One clarifying round: what the bot asked (`questions` for a structured round),
    and the user's answer (None while unanswered)."""

    asked: str
    questions: ClarifyingRound | None
    answer: str | None


@dataclass(frozen=True, slots=True)
class Transcript:
    """A consultation's parts in order, with the labels of its language."""

    title: str
    started_at: datetime
    language: str
    request: str
    rounds: tuple[RoundPart, ...]
    final_answer: str | None
    follow_ups: tuple[FollowUpPart, ...] = ()

    def label(self, key: str, **values: object) -> str:
        return LABELS[self.language][key].format(**values)


def transcript_of(consultation: Consultation, language: str | None = None) -> Transcript:
    """The consultation's transcript; `language` (a code) chooses its labels, or, when
    None, the language its user messages are written in."""
    index = final_index(consultation)
    messages = consultation.messages if index is None else consultation.messages[: index + 1]
    turns = _turns(messages)
    request = turns[0][1] if turns and turns[0][0] is Role.USER else consultation.initial_request
    replies = [(i, text, q) for i, (role, text, q) in enumerate(turns) if role is Role.ASSISTANT]
    final: str | None = None
    if index is not None and turns and turns[-1][0] is Role.ASSISTANT:
        final = turns[-1][1]
        replies = replies[:-1]
    rounds = []
    for at, asked, questions in replies:
        following = turns[at + 1] if at + 1 < len(turns) else None
        answer = following[1] if following is not None and following[0] is Role.USER else None
        rounds.append(RoundPart(asked, questions, answer))
    follow_ups = tuple(
        FollowUpPart(_cut(part.question), None if part.answer is None else _cut(part.answer))
        for part in follow_up_parts(consultation)
    )
    if language is None:
        language = written_language(m.text for m in consultation.messages if m.role is Role.USER)
    return Transcript(
        title=_cut(title_of(request)),
        started_at=datetime.fromtimestamp(consultation.created_at, UTC),
        language=language if language in LABELS else "en",
        request=_cut(request),
        rounds=tuple(rounds),
        final_answer=final,
        follow_ups=follow_ups,
    )


def title_of(request: str) -> str:
    """The request's first non-blank line, cut at a word within `MAX_TITLE_CHARS`
    (with "…"); empty for a blank request."""
    line = next((ln for ln in request.splitlines() if ln.strip()), "")
    line = _SPACE.sub(" ", line).strip().lstrip("#>*- ").strip()
    if len(line) <= MAX_TITLE_CHARS:
        return line
    cut = line[: MAX_TITLE_CHARS - 1]
    if " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:") + "…"


def render_markdown(transcript: Transcript) -> str:
    """The transcript as one Markdown document: title, date, request, rounds, final answer,
    follow-ups."""
    t = transcript
    parts = [
        f"# {_one_line(t.title) or t.label('untitled')}",
        f"*{t.label('date')}: {t.started_at:%Y-%m-%d %H:%M} UTC*",
        f"## {t.label('request')}",
        t.request,
    ]
    for number, part in enumerate(t.rounds, 1):
        parts.append(f"## {t.label('round', number=number)}")
        parts.append(f"### {t.label('questions')}")
        parts.append(round_markdown(part))
        parts.append(f"### {t.label('answer')}")
        parts.append(part.answer if part.answer is not None else f"*{t.label('no_answer')}*")
    if t.final_answer is not None:
        parts.append(f"## {t.label('final')}")
        parts.append(t.final_answer)
    if t.follow_ups:
        parts.append(f"## {t.label('follow_ups')}")
    for number, follow_up in enumerate(t.follow_ups, 1):
        parts.append(f"### {t.label('follow_up', number=number)}")
        parts.append(follow_up.question)
        parts.append(f"#### {t.label('answer')}")
        parts.append(
            follow_up.answer if follow_up.answer is not None else f"*{t.label('no_answer')}*"
        )
    return _SURROGATE.sub("\ufffd", "\n\n".join(p.strip("\n") for p in parts) + "\n")


def round_markdown(part: RoundPart) -> str:
    """What the bot asked in a round: a structured round's preamble, then its questions as
    a numbered list with their options (`1a) …`) under each; the text of any other."""
    found = part.questions
    if found is None or not found.questions:
        return part.asked
    lines = [found.preamble, ""] if found.preamble else []
    for number, question in enumerate(found.questions, 1):
        lines.append(f"{number}. {question.text}")
        offered = [list(q.options) if n == number else [] for n, q in enumerate(found.questions, 1)]
        lines.extend(f"   - {line}" for line in option_lines(offered))
    return "\n".join(lines)


def _turns(messages: list[Message]) -> list[tuple[Role, str, ClarifyingRound | None]]:
    """Consecutive user messages joined into one turn; each assistant message its own."""
    turns: list[tuple[Role, str, ClarifyingRound | None]] = []
    for message in messages:
        text = _cut(message.text)
        if message.role is Role.USER and turns and turns[-1][0] is Role.USER:
            turns[-1] = (Role.USER, _cut(turns[-1][1] + "\n\n" + text), None)
        else:
            turns.append((message.role, text, message.questions))
    return turns


def _cut(text: str) -> str:
    """At most `MAX_PART_CHARS` characters, a lone surrogate (no character) replaced."""
    text = text if len(text) <= MAX_PART_CHARS else text[: MAX_PART_CHARS - 1] + "…"
    return _SURROGATE.sub("\ufffd", text)


def _one_line(text: str) -> str:
    return _SPACE.sub(" ", text).strip()
