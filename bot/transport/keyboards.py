"""The inline keyboard under a reply: under a round, a structured round's options, "Send
answers", and "Give the final answer now"; under a final answer, "Ask a follow-up" and
"Document"; and what the buttons' data says.

Invariants:
- a round's button names the round it belongs to (its consultation's id as 32 hex digits
  and the round's number) and numbers, never an option's text: its data always fits
  Telegram's 64 bytes, and what a press means is read from the stored round;
- `choice_of` and `round_of` read back only data shaped exactly as built here (ASCII
  digits, no sign, no leading zero, no extra field): anything else is None, so forged
  data is ignored before it reaches the service;
- a round of one question is answered by the press on an option (`ANSWER`); a round of
  several collects one option per question (`PICK`, the chosen ones marked ✓, their
  labels starting with the question's number) until "Send answers" (`SEND`);
- the "final answer now" button is under every reply that is not final, last; it names
  its round (`FINAL_NOW`) like the round's options, so pressed under an older round it
  answers that round's questions were answered instead of finishing another
  consultation (`ANSWER_NOW`, naming none, is what it sent before and still works);
- a final answer's buttons name only its consultation (`kind:<32 hex>`), read back by
  `consultation_of` as strictly as a round's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from core.domain.asking import RoundRef
from core.domain.clarifying import ClarifyingRound, Picks
from core.domain.outcomes import Reply
from i18n.translate import t

ANSWER_NOW = "answer"
"""Give the final answer now, naming no round: the button as sent before `FINAL_NOW`."""
FINAL_NOW = "qf"
"""Give the final answer now, from the round the button names."""
ANSWER = "qa"
"""An option of a round of one question: the press answers it."""
PICK = "qp"
"""An option of a round of several questions: the press chooses it (or unchooses it)."""
SEND = "qs"
"""Send the options chosen so far as the answers."""
FOLLOW_UP = "fu"
"""Ask a follow-up about the consultation the final answer ended."""
EXPORT = "ex"
"""Send the consultation as a document."""
CHOSEN = "✓ "
ROW_CHARS = 32
"""Options share a row while their labels add up to at most this many characters."""
ROW_BUTTONS = 3

_ID = "[0-9a-f]{32}"
_NUMBER = "[1-9][0-9]{0,3}"
_CHOICE = re.compile(f"({_ID}):({_NUMBER}):({_NUMBER}):({_NUMBER})")
_ROUND = re.compile(f"({_ID}):({_NUMBER})")


@dataclass(frozen=True, slots=True)
class Choice:
    """Option `option` of question `question` (both 1-based) of the round `ref` names."""

    ref: RoundRef
    question: int
    option: int


@functools.lru_cache(maxsize=16)
def answer_now_keyboard(language: str) -> InlineKeyboardMarkup:
    """The "answer now" button naming no round, in `language` (under a reply whose
    consultation id no button can carry), built once per language: PTB objects are
    immutable, and building these two costs more CPU than most steps of a round."""
    return InlineKeyboardMarkup([[answer_now_button(language)]])


def answer_now_button(language: str, ref: RoundRef | None = None) -> InlineKeyboardButton:
    """The "Give the final answer now" button, naming the round `ref` when given."""
    data = ANSWER_NOW if ref is None else f"{FINAL_NOW}:{ref.consultation_id}:{ref.round}"
    return InlineKeyboardButton(t(language, "answer_button"), callback_data=data)


def reply_keyboard(
    reply: Reply, language: str, *, follow_up: bool = True
) -> InlineKeyboardMarkup | None:
    """The keyboard under `reply`: under a final answer, "Ask a follow-up" (when
    `follow_up`) and "Document"; under a round, its options (when it offers any) above the
    "answer now" button."""
    bare = bare_id(reply.consultation_id)
    if reply.is_final:
        return None if bare is None else final_keyboard(bare, language, follow_up=follow_up)
    if bare is None:
        return answer_now_keyboard(language)
    ref = RoundRef(bare, reply.round)
    found = reply.questions
    if found is None or not found.has_options:
        return InlineKeyboardMarkup([[answer_now_button(language, ref)]])
    return round_keyboard(found, ref, language)


def final_keyboard(bare: str, language: str, *, follow_up: bool) -> InlineKeyboardMarkup:
    """The buttons under the final answer of the consultation `bare` (32 hex digits)."""
    row = [InlineKeyboardButton(t(language, "export_button"), callback_data=f"{EXPORT}:{bare}")]
    if follow_up:
        label = t(language, "follow_up_button")
        row.insert(0, InlineKeyboardButton(label, callback_data=f"{FOLLOW_UP}:{bare}"))
    return InlineKeyboardMarkup([row])


def round_keyboard(
    found: ClarifyingRound, ref: RoundRef, language: str, picks: Picks | None = None
) -> InlineKeyboardMarkup:
    """The round's options (chosen `picks` marked), "Send answers" when it asks several
    questions, then "answer now"."""
    several = len(found.questions) > 1
    kind = PICK if several else ANSWER
    rows: list[list[InlineKeyboardButton]] = []
    for number, question in enumerate(found.questions, 1):
        buttons = [
            InlineKeyboardButton(
                option_label(found, number, option, picks),
                callback_data=choice_data(kind, Choice(ref, number, option)),
            )
            for option in range(1, len(question.options) + 1)
        ]
        rows.extend(packed(buttons))
    if several:
        label = t(language, "send_answers_button")
        rows.append([InlineKeyboardButton(label, callback_data=round_data(ref))])
    rows.append([answer_now_button(language, ref)])
    return InlineKeyboardMarkup(rows)


def with_picks(
    markup: InlineKeyboardMarkup, found: ClarifyingRound, picks: Picks
) -> InlineKeyboardMarkup:
    """`markup` (a round's keyboard as sent) with its options marked as `picks` say; every
    other button, and the layout, stay as they are."""
    rows = []
    for row in markup.inline_keyboard:
        buttons = []
        for button in row:
            data = button.callback_data if isinstance(button.callback_data, str) else ""
            kind, _, value = data.partition(":")
            choice = choice_of(value) if kind == PICK else None
            if choice is not None and _offers(found, choice):
                label = option_label(found, choice.question, choice.option, picks)
                button = InlineKeyboardButton(label, callback_data=data)
            buttons.append(button)
        rows.append(buttons)
    return InlineKeyboardMarkup(rows)


def option_label(
    found: ClarifyingRound, question: int, option: int, picks: Picks | None = None
) -> str:
    """An option's button text: "n · option" when the round asks several questions, ✓ in
    front when it is chosen."""
    text = found.questions[question - 1].options[option - 1]
    if len(found.questions) > 1:
        text = f"{question} · {text}"
    chosen = picks is not None and any(
        a.question == question and a.option == option for a in picks.answers
    )
    return CHOSEN + text if chosen else text


def packed(buttons: Sequence[InlineKeyboardButton]) -> list[list[InlineKeyboardButton]]:
    """Buttons in rows, in order: short labels share a row, a long one has its own."""
    rows: list[list[InlineKeyboardButton]] = []
    width = 0
    for button in buttons:
        size = len(button.text)
        if rows and len(rows[-1]) < ROW_BUTTONS and width + size <= ROW_CHARS:
            rows[-1].append(button)
            width += size
        else:
            rows.append([button])
            width = size
    return rows


def bare_id(consultation_id: str) -> str | None:
    """The id as a button carries it (32 hex digits); None for an id of another shape."""
    bare = consultation_id.replace("-", "").lower()
    return bare if re.fullmatch(_ID, bare) else None


def choice_data(kind: str, choice: Choice) -> str:
    ref = choice.ref
    return f"{kind}:{ref.consultation_id}:{ref.round}:{choice.question}:{choice.option}"


def round_data(ref: RoundRef) -> str:
    return f"{SEND}:{ref.consultation_id}:{ref.round}"


def choice_of(value: str) -> Choice | None:
    """The choice an `ANSWER` or `PICK` button's value (the data after "kind:") names."""
    match = _CHOICE.fullmatch(value)
    if match is None:
        return None
    bare, round_, question, option = match.groups()
    return Choice(RoundRef(bare, int(round_)), int(question), int(option))


def round_of(value: str) -> RoundRef | None:
    """The round a `SEND` or `FINAL_NOW` button's value names."""
    match = _ROUND.fullmatch(value)
    if match is None:
        return None
    bare, round_ = match.groups()
    return RoundRef(bare, int(round_))


def consultation_of(value: str) -> str | None:
    """The consultation (32 hex digits) a `FOLLOW_UP` or `EXPORT` button's value names."""
    return value if re.fullmatch(_ID, value) else None


def _offers(found: ClarifyingRound, choice: Choice) -> bool:
    return 1 <= choice.question <= len(found.questions) and 1 <= choice.option <= len(
        found.questions[choice.question - 1].options
    )
