"""The options of a structured round as the simulated user sees them, and its choices read
back from its message.

Each option is labelled by its question's number and a letter: `1a)`, `1b)`, `2a)` … The
simulated user chooses one by writing the label alone on a line, or the label followed by
the option's text (a Cyrillic letter counts as the Latin one at its place, а б в г д, and
as its look-alike, с е). Invariant: a line is taken as a choice only when it names a
question and an option the round has (and any text after the label is that option's, in
full or cut short); every other line stays in the typed text sent with the choices, so a
message that cannot be read as choices reaches the bot as typed, never lost. A later
choice for a question replaces an earlier one, as in `core.domain.clarifying.answers_text`.
Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.domain.clarifying import OPTION_LETTERS, Answer, ClarifyingRound

_CYRILLIC = {"а": "a", "б": "b", "в": "c", "г": "d", "д": "e", "с": "c", "е": "e"}
_LABEL = re.compile(
    r"^\(?(?P<question>\d{1,2})\s?(?P<letter>[a-zа-яё])(?![a-zа-яё])\)?[).:\-–—]?\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
_WRAPPING = "\"'«»“”„`*_ \t"


@dataclass(frozen=True, slots=True)
class Choices:
    """What a message answers by option (in the questions' order), and the rest as typed."""

    answers: tuple[Answer, ...]
    typed: str


def read_choices(text: str, round_: ClarifyingRound) -> Choices:
    """The choices `text` makes among the round's options (see the module)."""
    chosen: dict[int, int] = {}
    typed: list[str] = []
    for line in text.splitlines():
        found = _choice(line, round_)
        if found is None:
            typed.append(line)
        else:
            chosen[found[0]] = found[1]
    answers = tuple(Answer(question, option=chosen[question]) for question in sorted(chosen))
    return Choices(answers, "\n".join(typed).strip())


def _choice(line: str, round_: ClarifyingRound) -> tuple[int, int] | None:
    match = _LABEL.match(line.strip().strip(_WRAPPING))
    if match is None:
        return None
    question = int(match["question"])
    letter = match["letter"].lower()
    letter = _CYRILLIC.get(letter, letter)
    option = OPTION_LETTERS.find(letter) + 1
    if not 1 <= question <= len(round_.questions) or option < 1:
        return None
    options = round_.questions[question - 1].options
    if option > len(options):
        return None
    rest = _plain(match["rest"])
    if rest and not _plain(options[option - 1]).startswith(rest):
        return None
    return question, option


def _plain(text: str) -> str:
    """Text compared case- and spacing-blind, without wrapping quotes or a final stop."""
    return " ".join(text.strip(_WRAPPING).rstrip(".!").split()).casefold()
