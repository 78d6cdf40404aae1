"""The console's answers to a structured round: the options shown as `1a) …`, and a typed
line read as options picked (`1a 2c`) followed by text.

Invariants:
- an option is named by its question's number and a letter, `a` for its first option,
  the same in what is shown and what is read (`option_label`);
- a line is read as answers only while the last reply asked questions with options, and
  only its leading tokens shaped like `1a` (any case) are answers: the rest of the line,
  as typed, goes with them; a line without such tokens is text as it is;
- a token naming a question or option the round does not have refuses the whole line
  (`NoSuchOption`, one line saying why): nothing of it is sent.
Pure: no I/O.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from core.clarifying import Answer, ClarifyingRound

LETTERS = string.ascii_lowercase
_TOKEN = re.compile(r"\s*(\d{1,4})([A-Za-z])(?=\s|$)")


class NoSuchOption(ValueError):
    """A token naming a question or option the round does not have."""


@dataclass(frozen=True, slots=True)
class TypedLine:
    """What a typed line says: the options it picks, then its text."""

    answers: tuple[Answer, ...]
    text: str


def option_label(question: int, option: int) -> str:
    """`1a` for the first option of question 1 (both 1-based)."""
    return f"{question}{LETTERS[option - 1]}"


def option_lines(round_: ClarifyingRound) -> list[str]:
    """`1a) …` for every option of every question, in the questions' order."""
    return [
        f"{option_label(number, index)}) {option}"
        for number, question in enumerate(round_.questions, 1)
        for index, option in enumerate(question.options, 1)
    ]


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
    option = LETTERS.index(letter) + 1
    if option > len(options):
        if not options:
            raise NoSuchOption(f"{token}: question {number} has no options; type its answer")
        last = LETTERS[len(options) - 1]
        choices = f"{number}a" if last == "a" else f"{number}a–{number}{last}"
        raise NoSuchOption(f"{token}: question {number} has no option {letter} ({choices})")
    return Answer(number, option)
