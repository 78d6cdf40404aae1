"""A chat's history of consultations, which consultation a history number or a button
names, and the language an export of one is labelled in.

Invariants: the history is the chat's `HISTORY_SIZE` newest consultations whatever their
status, newest first, numbered from 1 (`/export N` reads the same numbers); a
consultation is handed out only to the chat it belongs to, so an id of another chat's
consultation (forged or stale) finds nothing; reading never changes a consultation and
never waits for a running turn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from core.domain.clarifying import ClarifyingRound
from core.domain.consultation import Consultation, ConsultationSummary, Status
from core.domain.ports import ConsultationStore
from core.prompting.final_now import user_language
from core.prompting.prompts import PromptLibrary
from core.turns.round_answers import asked_round

HISTORY_SIZE = 10
_SPACE = re.compile(r"\s+")


class History:
    """Reads a chat's past consultations from the store (reached as `Engine.history`)."""

    def __init__(self, store: ConsultationStore, prompts: PromptLibrary) -> None:
        self._store = store
        self._prompts = prompts

    async def recent(self, chat_key: str) -> list[ConsultationSummary]:
        """The chat's newest consultations, newest (number 1) first."""
        return await self._store.recent(chat_key, HISTORY_SIZE)

    async def find(self, chat_key: str, consultation_id: str | None) -> Consultation | None:
        """The chat's consultation `consultation_id` (None: its newest), messages included;
        None when the chat has none, or the id names no consultation of this chat."""
        if consultation_id is None:
            newest = await self._store.recent(chat_key, 1)
            if not newest:
                return None
            consultation_id = newest[0].id
        found = await self._store.get(consultation_id)
        return found if found is not None and found.chat_key == chat_key else None

    async def latest(self, chat_key: str) -> Consultation | None:
        """The chat's newest consultation, whatever its status, messages included."""
        return await self._store.load_latest(chat_key)

    async def round_asked(self, chat_key: str) -> ClarifyingRound | None:
        """The structured questions the chat's active consultation asked last, which option
        labels answer (None: no active consultation, or its last reply asked none); an edge
        that starts again mid-consultation reads them here (`round_answers.asked_round`)."""
        active = await self._store.load_active(chat_key)
        return asked_round(active) if active is not None else None

    def written_language(self, consultation: Consultation) -> str | None:
        """The code of the language the consultation's user writes in (`core.prompting.language`:
        "en" or "ru"), None when that cannot be told; the automatic "final answer now"
        request is not the user's writing."""
        return user_language(consultation, self._prompts)


def numbered(history: Sequence[ConsultationSummary], number: int) -> ConsultationSummary | None:
    """The consultation shown as `number` (1 = newest) in `history`; None outside it."""
    return history[number - 1] if 1 <= number <= len(history) else None


def has_final_answer(summary: ConsultationSummary) -> bool:
    """Only a complete consultation ended with a final answer to show again."""
    return summary.status is Status.COMPLETE


def request_line(request: str, max_chars: int) -> str:
    """The request on one line, cut at `max_chars` with "…"."""
    line = _SPACE.sub(" ", request).strip()
    if len(line) <= max_chars:
        return line
    return line[: max_chars - 1].rstrip() + "…"
