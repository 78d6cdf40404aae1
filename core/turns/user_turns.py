"""The user's side of a turn: the consultation it goes to, and its message in the store.

Invariants it keeps:
- the user's message is committed to the store before the model is called (the caller
  answers only after these writes returned);
- an identical resend of the open turn is not stored twice;
- an empty message (nothing but invisible characters) is refused before anything is stored;
- another writer on the same store (another process, whose locks this one cannot see)
  is settled by the store: a consultation it started first is joined, not duplicated;
- an expired consultation is not continued: it is marked EXPIRED and the turn is told so
  (`Notice.PREVIOUS_EXPIRED`).
"""

from __future__ import annotations

import uuid

from core.domain.blank import is_blank
from core.domain.consultation import Consultation, Message, ModelOptions, Role, Status
from core.domain.errors import ActiveConsultationExists, EmptyMessage
from core.domain.facts import MemoryScope
from core.domain.outcomes import Notice
from core.domain.ports import ConsultationStore
from core.domain.usage import Payer
from core.prompting.requests import EngineConfig
from core.prompting.rounds import append_user_message, is_duplicate_of_open_turn, is_expired

_START_ATTEMPTS = 3
"""Creating a consultation is refused while another writer's is active; if that one ends
before it can be joined, starting is tried again, this many times in all."""


def require_text(text: str) -> str:
    """`text` unless it is blank (`EmptyMessage`)."""
    if is_blank(text):  # zero-width and other invisible characters count as nothing
        raise EmptyMessage("the message is empty")
    return text


def asker_of(payer: Payer | None, memory: MemoryScope | None) -> str | None:
    """The person a consultation started now records as who asked: the person it is
    charged to, else the person whose memory it reaches (the terminal's `console:local`,
    charged to no person); None when neither is known."""
    if payer is not None and payer.person is not None:
        return payer.person
    return None if memory is None else memory.person


class UserTurns:
    """Finds, starts and adds to consultations (the caller holds the chat's lock)."""

    def __init__(self, store: ConsultationStore, config: EngineConfig) -> None:
        self._store = store
        self._config = config

    async def active_or_none(
        self, chat_key: str, now: float
    ) -> tuple[Consultation | None, set[Notice]]:
        """The chat's active consultation as `vetted` sees it."""
        return await self.vetted(chat_key, await self._store.load_active(chat_key), now)

    async def vetted(
        self, chat_key: str, consultation: Consultation | None, now: float
    ) -> tuple[Consultation | None, set[Notice]]:
        """The chat's active consultation as loaded, unless it expired (then None, and the
        notice that the previous one expired)."""
        if consultation is not None and is_expired(
            consultation, now=now, ttl_seconds=self._config.session_ttl_seconds
        ):
            await self._store.set_status(consultation.id, Status.EXPIRED, at=now)
            return None, {Notice.PREVIOUS_EXPIRED}
        if consultation is None and await self._store.latest_status(chat_key) is Status.EXPIRED:
            # The periodic cleanup expired it; nothing newer started, so nobody was told yet.
            return None, {Notice.PREVIOUS_EXPIRED}
        return consultation, set()

    async def start(
        self,
        chat_key: str,
        text: str,
        author: str | None,
        author_id: int | None,
        now: float,
        turn_id: str | None,
        *,
        memory: tuple[str | None, tuple[str, ...]] = (None, ()),
        starter: str | None = None,
        person: str | None = None,
        start_limit: int = 0,
    ) -> tuple[Consultation, bool]:
        """Start the chat's consultation with `text`, asked by `person`; True when this
        call started it (and then it counts as one `starter` started,
        `ConsultationStore.create`, within `start_limit`: `StartRefused` and nothing stored
        at it).

        Another writer (another process) may have started one since this turn found
        none: the store refuses a second ACTIVE one, and the message joins that one
        instead, as it would have had it been seen in time (False: no STARTED notice).
        """
        for _ in range(_START_ATTEMPTS):
            try:
                created = await self._create(
                    chat_key,
                    text,
                    author,
                    author_id,
                    now,
                    turn_id,
                    memory,
                    starter,
                    person,
                    start_limit,
                )
                return created, True
            except ActiveConsultationExists:
                existing = await self._store.load_active(chat_key)
            if existing is not None:  # else it ended meanwhile: try to start one again
                await self.add_message(existing, text, author, now, turn_id)
                return existing, False
        raise ActiveConsultationExists(chat_key)

    async def add_message(
        self,
        consultation: Consultation,
        text: str,
        author: str | None,
        now: float,
        turn_id: str | None = None,
    ) -> None:
        """Commit the user's message to the consultation's open turn (once: an identical
        resend of that turn is not stored again)."""
        if is_duplicate_of_open_turn(consultation, text, author):
            return
        message = Message(Role.USER, text, now, author=author, turn_id=turn_id)
        await self._store.add_message(consultation.id, message, last_activity_at=now)
        append_user_message(consultation, message)

    async def clear_picks(self, consultation: Consultation) -> None:
        """Forget the picks a stored turn carried, so no later turn repeats them."""
        await self._store.save_picks(consultation.id, None)
        consultation.picks = None

    async def _create(
        self,
        chat_key: str,
        text: str,
        author: str | None,
        author_id: int | None,
        now: float,
        turn_id: str | None,
        memory: tuple[str | None, tuple[str, ...]],
        starter: str | None,
        person: str | None,
        start_limit: int,
    ) -> Consultation:
        settings = await self._store.load_chat_settings(chat_key)
        consultation = Consultation(
            id=str(uuid.uuid4()),
            chat_key=chat_key,
            max_rounds=settings.max_rounds or self._config.default_max_rounds,
            initial_request=text,
            created_at=now,
            last_activity_at=now,
            role=settings.role or self._config.default_role,
            system_prompt=(
                settings.system_prompt
                if settings.system_prompt or settings.role
                else self._config.default_instruction
            ),
            options=ModelOptions(model=settings.model),
            started_by=author_id,
            memory_owner=memory[0],
            memory_facts=memory[1],
            person=person,
            messages=[Message(Role.USER, text, now, author=author, turn_id=turn_id)],
        )
        await self._store.create(consultation, starter=starter, start_limit=start_limit)
        return consultation
