"""Answers typed to a structured round, as the terminal and the OpenAI-compatible endpoint
read them: the round shown with each question's options under it as `1a) …`
(`round_text`, the terminal's form), and a typed line read as options picked (`1a 2c`)
followed by text (`read_line`, every edge where a person types labels).

Invariants:
- an option is named by its question's number and a letter, `a` for its first option,
  the same in what is shown and what is read (`option_label`);
- a line is read as answers only while the last reply asked questions with options, and
  only its leading tokens shaped like `1a` (any case) are answers: the rest of the line,
  as typed, goes with them; a line without such tokens is text as it is;
- a token naming a question or option the round does not have refuses the whole line
  (`NoSuchOption`, one line saying why): nothing of it is sent;
- the questions are always numbered, also a round's only one, so that the text shown of a
  round growing as it streams only ever grows (a second question does not renumber the
  first).
Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.domain.clarifying import OPTION_LETTERS, Answer, ClarifyingRound, option_label

_TOKEN = re.compile(r"\s*(\d{1,4})([A-Za-z])(?=\s|$)")


class NoSuchOption(ValueError):
    """A token naming a question or option the round does not have."""


@dataclass(frozen=True, slots=True)
class TypedLine:
    """What a typed line says: the options it picks, then its text."""

    answers: tuple[Answer, ...]
    text: str


OPTION_INDENT = "   "


def round_text(round_: ClarifyingRound) -> str:
    """The round as the terminal shows it: the preamble, then each numbered question with
    its options under it, indented, as `1a) …`."""
    lines: list[str] = []
    for number, question in enumerate(round_.questions, 1):
        lines.append(f"{number}. {question.text}")
        lines.extend(
            f"{OPTION_INDENT}{option_label(number, index)}) {option}"
            for index, option in enumerate(question.options, 1)
        )
    return "\n\n".join(part for part in (round_.preamble, "\n".join(lines)) if part)


def read_line(line: str, round_: ClarifyingRound | None) -> TypedLine:
    """The options `line` picks with its leading tokens and the text after them; the
    whole line as text when `round_` (the last reply's questions) offers no options.

    Raises `NoSuchOption` for a token the round has no option for."""
    if round_ is None or not round_.has_options:
        return TypedLine((), line)
    answers: list[Answer] = []
    rest = line
    while (match := _TOKEN.match(rest)) is not None:
        answers.append(_answer(round_, int(match[1]), match[2].lower()))
        rest = rest[match.end() :]
    return TypedLine(tuple(answers), rest.strip() if answers else line)


def _answer(round_: ClarifyingRound, number: int, letter: str) -> Answer:
    token = f"{number}{letter}"
    if not 1 <= number <= len(round_.questions):
        count = len(round_.questions)
        asked = "1" if count == 1 else f"1–{count}"
        raise NoSuchOption(f"{token}: there is no question {number} (questions: {asked})")
    options = round_.questions[number - 1].options
    option = OPTION_LETTERS.find(letter) + 1  # 0: a letter no option ever has
    if not 1 <= option <= len(options):
        if not options:
            raise NoSuchOption(f"{token}: question {number} has no options; type its answer")
        last = OPTION_LETTERS[len(options) - 1]
        choices = f"{number}a" if last == "a" else f"{number}a–{number}{last}"
        raise NoSuchOption(f"{token}: question {number} has no option {letter} ({choices})")
    return Answer(number, option)
