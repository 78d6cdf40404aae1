"""A clarifying round as Markdown for a chat app, and read back from the copy the app sends.

Chat apps that speak the OpenAI API keep the conversation themselves and send it whole with
every request; the round they send back is the text this module wrote. So:

Invariants:
- a round's Markdown ends with exactly one of `CLOSINGS` (its last line), and nothing else
  written for a chat app does: a reply is a round exactly when it ends so (`is_round`);
- a structured round is written as its preamble, then each question numbered, its options
  under it as list items labelled as they are typed (`- 1a) …`,
  `core.domain.clarifying.option_label`); `read_round` reads exactly that back (the
  preamble, questions and options), so answers by label still name the options after the
  server forgot the round;
- a round asked in prose is its text, then the closing line.
Pure: no I/O.
"""

from __future__ import annotations

import re

from core.domain.clarifying import ClarifyingRound, Question, option_label

WITH_OPTIONS = (
    "_Answer with the labels (such as `1a 2b`) or in your own words; "
    "`/answer` gives the final answer now._"
)
IN_OWN_WORDS = "_Answer in your own words; `/answer` gives the final answer now._"
CLOSINGS = (WITH_OPTIONS, IN_OWN_WORDS)

_QUESTION = re.compile(r"^(\d{1,2})\. (.+)$")
_OPTION = re.compile(r"^ {2,4}- (\d{1,2})([a-e])\) (.+)$")


def round_markdown(text: str, questions: ClarifyingRound | None) -> str:
    """The round as a chat app shows it: `questions` when the round was structured (then
    `text` is unused), else `text` as the model wrote it; then its closing line."""
    if questions is None:
        return f"{text.rstrip()}\n\n{IN_OWN_WORDS}"
    lines: list[str] = []
    for number, question in enumerate(questions.questions, 1):
        lines.append(f"{number}. {question.text}")
        lines.extend(
            f"   - {option_label(number, index)}) {option}"
            for index, option in enumerate(question.options, 1)
        )
    closing = WITH_OPTIONS if questions.has_options else IN_OWN_WORDS
    parts = (questions.preamble, "\n".join(lines), closing)
    return "\n\n".join(part for part in parts if part)


def is_round(text: str) -> bool:
    """Whether a reply a client sends back was a clarifying round (see the module)."""
    return _last_line(text) in CLOSINGS


def round_body(text: str) -> str:
    """A round's Markdown without its closing line; any other text as it is."""
    if not is_round(text):
        return text
    return text.rstrip()[: -len(_last_line(text))].rstrip()


def read_round(text: str) -> tuple[str, ClarifyingRound | None]:
    """A round's text as the consultation stores it, and its questions when it was
    structured with options (read from the numbered questions and their `- 1a) …` items);
    (body, None) for a round asked in prose or a reply that is no round."""
    body = round_body(text)
    if not is_round(text) or _last_line(text) != WITH_OPTIONS:
        return body, None
    preamble: list[str] = []
    questions: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        question = _QUESTION.match(line)
        option = _OPTION.match(line)
        if question is not None and int(question[1]) == len(questions) + 1:
            questions.append((question[2].strip(), []))
        elif option is not None and questions and int(option[1]) == len(questions):
            questions[-1][1].append(option[3].strip())
        elif not questions:
            preamble.append(line)
        else:  # a line of no known shape among the questions: not a round written here
            return body, None
    if not questions:
        return body, None
    asked = tuple(Question(q, tuple(options)) for q, options in questions)
    found = ClarifyingRound("\n".join(preamble).strip(), asked)
    return found.text, found


def _last_line(text: str) -> str:
    stripped = text.rstrip()
    return stripped[stripped.rfind("\n") + 1 :].strip()
