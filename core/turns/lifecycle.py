"""How a chat's stored consultations end and go, outside its turns: reset, forgotten,
deleted by an operator, a given-up turn taken back, moved to a new chat key, expired and
purged.

Invariants:
- each change takes the lock of the chat it changes (the turns' lock: `core.turns.service`), so
  it never lands in the middle of one of the chat's turns; only the periodic cleanup,
  which touches idle and ended consultations alone, takes none;
- ending or deleting a consultation never waits for the model: the chat's running turn is
  stopped first (it then stores no reply and raises `TurnCancelled`), so the change is next
  in line for the chat's lock and a turn that arrives after it starts afresh;
- a deletion is one transaction of the store, logged in the same one when an operator
  makes it; an answered turn is never taken back, its reply being part of the
  consultation.
"""

from __future__ import annotations

from collections.abc import Callable

from core.domain.audit import AuditEntry
from core.domain.consultation import Status
from core.domain.ports import ChatLocks, ConsultationStore
from core.prompting.requests import EngineConfig
from core.turns.sessions import ApiSessions


class Lifecycle:
    """Ends, deletes and moves a chat's consultations (reached as `Engine.lifecycle`)."""

    def __init__(
        self,
        store: ConsultationStore,
        config: EngineConfig,
        clock: Callable[[], float],
        *,
        locks: ChatLocks,
        stop: Callable[[str], object],
        sessions: ApiSessions,
    ) -> None:
        """`locks` are the service's; `stop` stops a chat's running turn
        (`core.turns.running.RunningTurns.stop`)."""
        self._store = store
        self._config = config
        self._clock = clock
        self._locks = locks
        self._stop = stop
        self._sessions = sessions

    async def reset(self, chat_key: str) -> bool:
        """End the active consultation, stopping a reply being written; True when there was one.

        The stop happens before waiting for the chat, so the reset is next in line
        for it: a turn that arrives after the reset starts a new consultation.
        """
        self._stop(chat_key)
        async with self._locks.hold(chat_key):
            consultation = await self._store.load_active(chat_key)
            if consultation is None:
                return False
            await self._store.set_status(consultation.id, Status.RESET, at=self._clock())
            return True

    async def forget(self, chat_key: str) -> int:
        """Delete everything kept under the chat key: its consultations of any status with
        their messages and idempotency keys, and its settings; how many consultations went.

        A reply being written is stopped first (as by `reset`), so it stores nothing
        afterwards; the deletion is one transaction.
        """
        self._stop(chat_key)
        async with self._locks.hold(chat_key):
            return await self._store.forget_chat(chat_key)

    async def delete_consultation(self, consultation_id: str, audit: AuditEntry) -> bool:
        """Delete one consultation (an operator's action, logged by `audit` in the same
        transaction); False when there is none by that id. An ACTIVE one's reply being
        written is stopped first, as by `reset`; any other waits for its chat's turn to end."""
        found = await self._store.get(consultation_id)
        if found is None:
            return False
        if found.status is Status.ACTIVE:
            self._stop(found.chat_key)
        async with self._locks.hold(found.chat_key):
            return await self._store.delete_consultation(consultation_id, audit)

    async def forget_session(self, session_id: str) -> int:
        """`forget` for an API session; `SessionNotFound` for an id that names none."""
        consultation = await self._sessions.get_session(session_id)
        return await self.forget(consultation.chat_key)

    async def withdraw(self, chat_key: str, turn_id: str) -> bool:
        """Take back a turn that was given up before it was answered (its handling failed,
        hung past its deadline or was tried too often), so the chat's next turn does not
        carry the message that broke it; True when a message was taken back. An answered
        turn stays: its reply is part of the consultation.
        """
        async with self._locks.hold(chat_key):
            found, _ = await self._store.load_turn(chat_key, turn_id)
            if found is None or found.reply is not None:
                return False
            return await self._store.withdraw_turn(found.consultation.id, turn_id)

    async def move_chat(self, old_key: str, new_key: str) -> int:
        """Carry a chat's consultation and settings over to its new key."""
        async with self._locks.hold(old_key), self._locks.hold(new_key):
            return await self._store.move_chat(old_key, new_key)

    async def cleanup(
        self, *, retention_seconds: float, now: float | None = None
    ) -> tuple[int, int]:
        """Expire idle consultations and delete finished ones past retention."""
        now = self._clock() if now is None else now
        expired = await self._store.expire_idle(
            inactive_since=now - self._config.session_ttl_seconds, at=now
        )
        purged = await self._store.purge(older_than=now - retention_seconds)
        return expired, purged
