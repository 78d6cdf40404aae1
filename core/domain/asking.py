"""A user's message to a chat's consultation, as one value: what `ConsultationService.ask`
takes (`core.turns.service`), and which structured round a press answers (`RoundRef`).

Plain values: no I/O; `on_text` is the edge's own callback, called with the reply's text
as it streams.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.domain.attachments import Image
from core.domain.clarifying import Answer
from core.domain.consultation import Consultation
from core.domain.facts import MemoryScope
from core.domain.ports import OnText
from core.domain.tools import OnToolStart
from core.domain.usage import Payer


@dataclass(frozen=True, slots=True)
class RoundRef:
    """Which round of which consultation a press answers (as a button carries it)."""

    consultation_id: str
    round: int

    def names(self, consultation: Consultation) -> bool:
        """Whether this refers to `consultation`'s current round (ids compared without
        their dashes, so a button may carry a UUID's 32 hex digits)."""
        return (
            _bare(self.consultation_id) == _bare(consultation.id)
            and self.round == consultation.current_round
        )


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A message that advances a chat's consultation (starting one if needed).

    `text` is the message as stored (`MessageInput.stored_text`); `images` reach the model
    in this round's request only. `turn_id` names the update the message came from:
    handled again, that update makes no second turn. `answers` and `ref` answer a
    structured round (`core.turns.round_answers.user_message_text`; `text` may then be empty).
    `memory` names whose client memory a consultation this message starts uses (None:
    none); the reply's usage is charged to the chat and `payer`.
    """

    chat_key: str
    text: str
    author: str | None = None
    author_id: int | None = None
    is_group: bool = False
    on_text: OnText | None = None
    # Called when a tool the model asked for starts (`core.domain.tools`): the edge shows it.
    on_tool: OnToolStart | None = None
    turn_id: str | None = None
    images: Sequence[Image] = ()
    answers: Sequence[Answer] = ()
    ref: RoundRef | None = None
    memory: MemoryScope | None = None
    payer: Payer | None = None


def _bare(identifier: str) -> str:
    return identifier.replace("-", "").lower()
