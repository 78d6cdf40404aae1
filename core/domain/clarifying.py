"""A structured clarifying round: ranked questions with suggested answers, read from the
model's JSON, shown as text, and answered as question–answer pairs.

Invariants:
- a round holds 1 to `MAX_QUESTIONS` questions, most important first, each with 0 to
  `MAX_OPTIONS` distinct options of at most `MAX_OPTION_CHARS` characters; whatever the
  model wrote past those limits (more questions, long or repeated options, blank text)
  is dropped when the round is read, so every edge can rely on them (`read_round`);
- the text of questions and options holds no format characters (Unicode Cf: zero-width,
  bidi overrides), removed before repeats are dropped, so `"Ye\u200bs"` and `"Yes"` are
  one option;
- the schema sent to the provider keeps to the subset every strict structured-output
  provider accepts (all fields required, no additional properties, no length or count
  constraints): the limits are the prompt's and `read_round`'s, never the provider's;
- the text of a round (`ClarifyingRound.text`) is what the history, the context window
  and clients without the structured fields see: the preamble, then the questions
  (numbered when there are several), never any JSON;
- an answered round is stored as the user's message in question–answer pairs
  (`answers_text`), so every later round, the final one included, sees which question
  each answer answers;
- a reply is JSON when it holds a JSON object (`holds_json`), else prose; a streamed
  one is shown by `core.prompting.clarifying_stream`.
Pure: no I/O.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jiter

from core.domain.errors import AnswerInvalid
from core.domain.json_answer import strip_fences

SCHEMA_NAME = "clarifying_round"
MAX_QUESTIONS = 4
MAX_OPTIONS = 5
MAX_OPTION_CHARS = 40
MAX_QUESTION_CHARS = 500
MAX_PREAMBLE_CHARS = 1000
JSON_START = re.compile(r'\{\s*"')
"""Where a JSON object with a field starts, in prose or not."""

ROUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "preamble": {"type": "string"},
        "questions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "options": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["text", "options"],
                "additionalProperties": False,
            },
        },
        "ready_for_final": {"type": "boolean"},
    },
    "required": ["preamble", "questions", "ready_for_final"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    options: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClarifyingRound:
    """What the model asked in one round (`ready_for_final`: it asked nothing, it knows
    enough to answer)."""

    preamble: str
    questions: tuple[Question, ...]
    ready_for_final: bool = False

    @property
    def text(self) -> str:
        """The round as plain text: the preamble, then the questions (numbered when
        there are several)."""
        lines = [f"{_number(n, self)}{q.text}" for n, q in enumerate(self.questions, 1)]
        return "\n\n".join(part for part in (self.preamble, "\n".join(lines)) if part)

    @property
    def has_options(self) -> bool:
        return any(q.options for q in self.questions)

    def to_json(self) -> str:
        """The stored form (`from_json` reads it back)."""
        return json.dumps(
            {
                "preamble": self.preamble,
                "questions": [{"text": q.text, "options": list(q.options)} for q in self.questions],
                "ready_for_final": self.ready_for_final,
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str | None) -> ClarifyingRound | None:
        """A stored round; None for no value or one that is no round (never raises)."""
        if not text:
            return None
        try:
            return read_round(json.loads(text))
        except (ValueError, RecursionError):
            return None


OPTION_LETTERS = "abcde"
"""The letters naming a question's options where they are typed (`1a`, `2c`)."""


def option_label(question: int, option: int) -> str:
    """`1a` for the first option of question 1 (both 1-based): how an option is named
    wherever a person or a simulated user types it."""
    return f"{question}{OPTION_LETTERS[option - 1]}"


def option_lines(options: Sequence[Sequence[str]]) -> list[str]:
    """`1a) …` for every option of every question, given each question's options in the
    questions' order."""
    return [
        f"{option_label(number, index)}) {option}"
        for number, offered in enumerate(options, 1)
        for index, option in enumerate(offered, 1)
    ]


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer to question `question` (1-based): option `option` (1-based) or `text`.

    `by` names who gave it when someone else than the turn's author did (a group).
    """

    question: int
    option: int | None = None
    text: str | None = None
    by: str | None = None


@dataclass(frozen=True, slots=True)
class Picks:
    """Options chosen so far for the questions of round `round` (the consultation's last
    answered round), not yet sent; picks of another round are stale and never used."""

    round: int
    answers: tuple[Answer, ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            {
                "round": self.round,
                "answers": [[a.question, a.option, a.text, a.by] for a in self.answers],
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str | None) -> Picks | None:
        """Stored picks; None for no value or a malformed one (never raises)."""
        if not text:
            return None
        try:
            value = json.loads(text)
            answers = tuple(
                Answer(int(q), None if o is None else int(o), t, b)
                for q, o, t, b in value["answers"]
            )
            return cls(int(value["round"]), answers)
        except (ValueError, TypeError, KeyError, RecursionError):
            return None

    def toggled(self, question: int, option: int, by: str | None) -> Picks:
        """These picks with option `option` of `question` chosen, or unchosen when it was:
        one option per question, the latest press wins."""
        others = tuple(a for a in self.answers if a.question != question)
        was = any(a.question == question and a.option == option for a in self.answers)
        chosen = () if was else (Answer(question, option, by=by),)
        return Picks(self.round, tuple(sorted(others + chosen, key=lambda a: a.question)))


def read_round(value: Any, *, partial: bool = False) -> ClarifyingRound | None:
    """The round in a parsed reply, within the limits (see the module); None when `value`
    is not shaped like one (not an object, or neither a question nor the ready flag; the
    start of a reply, `partial`, may hold only its preamble so far)."""
    if not isinstance(value, dict):
        return None
    ready = value.get("ready_for_final") is True
    raw_questions = value.get("questions")
    questions: list[Question] = []
    seen: set[str] = set()
    for item in raw_questions if isinstance(raw_questions, list) else ():
        if not isinstance(item, dict):
            continue
        text = _clean(item.get("text"), MAX_QUESTION_CHARS)
        if not text or text in seen:
            continue
        seen.add(text)
        questions.append(Question(text, _options(item.get("options"))))
        if len(questions) == MAX_QUESTIONS:
            break
    if not questions and not ready and not partial:
        return None
    preamble = _clean(value.get("preamble"), MAX_PREAMBLE_CHARS)
    return ClarifyingRound(preamble, tuple(questions), ready)


def holds_json(text: str) -> bool:
    """Whether a reply holds a JSON object, or starts as one (possibly in a code fence):
    a reply that does not is prose."""
    head = text.lstrip()[:16]
    return head.startswith(("{", "```")) or JSON_START.search(text) is not None


def parse_reply(text: str, *, cut_off: bool = False) -> ClarifyingRound | None:
    """The round in a whole reply; None when nothing shaped like one can be read from it.

    Valid JSON is read as is; broken JSON is repaired (json-repair). A reply cut off by
    its token limit (`cut_off`) keeps only its complete strings, so no question is shown
    cut in the middle, unless that leaves nothing.
    """
    body = strip_fences(text)
    if cut_off:
        found = read_round(partial_json(body, "on"))
        return found if found is not None else read_round(partial_json(body, "trailing-strings"))
    try:
        return read_round(json.loads(body))
    except ValueError:
        pass
    from json_repair import repair_json  # only for broken JSON: not held by every process

    try:
        repaired = repair_json(body, return_objects=True)
    except Exception:  # json-repair's own failure on hostile text: nothing to read
        return None
    return read_round(repaired)


def answers_text(
    round_: ClarifyingRound, answers: Sequence[Answer], typed: str = "", *, author: str | None
) -> str:
    """The user's message: one `n. <question> — <answer>` line per answered question (the
    number only when the round asked several), in the questions' order (the last answer
    to a question wins), then what was typed.

    Raises `AnswerInvalid` for a question or option the round does not have, or an
    answer with neither option nor text.
    """
    chosen: dict[int, Answer] = {}
    for answer in answers:
        chosen[answer.question] = answer
    lines = []
    for number in sorted(chosen):
        answer = chosen[number]
        if not 1 <= number <= len(round_.questions):
            raise AnswerInvalid(f"there is no question {number}")
        question = round_.questions[number - 1]
        value = _answer_value(question, answer)
        by = f" ({answer.by})" if answer.by and answer.by != author else ""
        lines.append(f"{_number(number, round_)}{question.text} — {value}{by}")
    typed = typed.strip()
    if typed:
        lines.append(typed)
    return "\n".join(lines)


def answers_read(round_: ClarifyingRound, text: str) -> dict[int, str]:
    """The answers `answers_text` wrote in `text`, by question number (1-based): the
    value after `<question> — ` on the question's line, without who gave it. Lines that
    answer no question of the round (typed words) are not answers; total, never raises."""
    found: dict[int, str] = {}
    for line in text.splitlines():
        for number, question in enumerate(round_.questions, 1):
            start = f"{_number(number, round_)}{question.text} — "
            if line.startswith(start) and number not in found:
                found[number] = line[len(start) :]
                break
    return found


def chosen_option(question: Question, value: str) -> int | None:
    """Which of `question`'s options (1-based) the answer `value` is, if any; an answer
    given for someone else ends in `(name)`."""
    for index, option in enumerate(question.options, 1):
        if value == option or value.startswith(f"{option} ("):
            return index
    return None


def _number(number: int, round_: ClarifyingRound) -> str:
    return f"{number}. " if len(round_.questions) > 1 else ""


def _answer_value(question: Question, answer: Answer) -> str:
    if answer.option is not None:
        if not 1 <= answer.option <= len(question.options):
            raise AnswerInvalid(f"question {answer.question} has no option {answer.option}")
        return question.options[answer.option - 1]
    text = (answer.text or "").strip()
    if not text:
        raise AnswerInvalid(f"the answer to question {answer.question} is empty")
    return " ".join(text.split())


def _options(value: Any) -> tuple[str, ...]:
    options: list[str] = []
    for item in value if isinstance(value, list) else ():
        text = _clean(item, MAX_OPTION_CHARS + 1)
        if text and len(text) <= MAX_OPTION_CHARS and text not in options:
            options.append(text)
        if len(options) == MAX_OPTIONS:
            break
    return tuple(options)


def _clean(value: Any, limit: int) -> str:
    """A string field on one line of single spaces, at most `limit` characters, without
    format characters (Unicode category Cf: zero-width and bidi controls), which no reader
    sees and which would make two equal-looking questions or options differ."""
    if not isinstance(value, str):
        return ""
    head = value[: limit * 4]
    if not head.isascii():
        head = "".join(c for c in head if unicodedata.category(c) != "Cf")
    return " ".join(head.split())[:limit]


def partial_json(text: str, mode: Literal["on", "trailing-strings"]) -> Any:
    """The value in the start of a JSON text (jiter's partial mode); None when unreadable."""
    try:
        return jiter.from_json(text.encode(), partial_mode=mode)
    except ValueError:
        return None
