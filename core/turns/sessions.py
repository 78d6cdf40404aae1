"""API sessions: the HTTP API's consultations, one per session id.

Invariants it keeps:
- a session is a consultation under the chat key `session_key(session id, scope)`
  (`core.domain.api_keys`: `api:<id>` for the deployment's bot, `api<n>:<id>` for bot n);
  only such consultations of its own scope are found by session id (a chat's never is,
  nor another bot's session);
- a session takes a round only while it is active and unexpired: a completed one raises
  `DialogCompleted`, any other `SessionNotFound` (an expired one is marked so on the way);
- a session's round limit is never set below the round it is in, so a reply never shows a
  round above its limit;
- reading a session back (`get_session`, `replay`) never changes it;
- a message sent with a turn id (the API's idempotency key) is in the session once
  however often it is sent: it is looked up by that id first and, found, answered as
  `Answerer.answer_again` says, like a Telegram update handled again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager

from core.domain.api_keys import key_range, session_key
from core.domain.attachments import Image
from core.domain.clarifying import Answer
from core.domain.consultation import Consultation, Message, ModelOptions, Role, Status, TurnRecord
from core.domain.errors import DialogCompleted, InvalidMaxRounds, SessionNotFound
from core.domain.facts import MemoryScope
from core.domain.outcomes import Reply
from core.domain.ports import ChatLocks, ConsultationStore, OnText
from core.domain.quotas import Stage, StartRefused
from core.domain.tools import OnToolStart
from core.domain.usage import Payer
from core.prompting.requests import EngineConfig
from core.prompting.rounds import is_expired
from core.turns.answering import Answerer
from core.turns.memories import opening
from core.turns.quota_checks import Admission, Quotas
from core.turns.quota_holds import holding, turn_tokens
from core.turns.round_answers import user_message_text
from core.turns.user_turns import UserTurns, asker_of, require_text

MAX_OPENED = 10_000
"""Sessions opened and not yet answered whose admissions are kept for their first round."""


class ApiSessions:
    """The session operations `ConsultationService` offers the HTTP API."""

    def __init__(
        self,
        store: ConsultationStore,
        config: EngineConfig,
        clock: Callable[[], float],
        *,
        locks: ChatLocks,
        turn: Callable[[str], AbstractAsyncContextManager[None]],
        user_turns: UserTurns,
        answerer: Answerer,
        quotas: Quotas,
        scope: int = 0,
    ) -> None:
        """`turn(key)` holds a chat key's lock as a turn (`locks` alone serves the calls
        that do not call the model); `scope` is the bot whose sessions these are."""
        self.scope = scope
        self._range = key_range(scope)
        self._store = store
        self._config = config
        self._clock = clock
        self._locks = locks
        self._turn = turn
        self._user_turns = user_turns
        self._answerer = answerer
        self._quotas = quotas
        # The admissions of sessions opened here and not yet answered (their holds).
        self._opened: dict[str, Admission] = {}

    def key(self, session_id: str) -> str:
        """The chat key of session `session_id` in this scope."""
        return session_key(session_id, self.scope)

    async def start_session(
        self,
        text: str,
        *,
        max_rounds: int = 1,
        system_prompt: str | None = None,
        options: ModelOptions | None = None,
        on_text: OnText | None = None,
        images: Sequence[Image] = (),
        memory: MemoryScope | None = None,
        payer: Payer | None = None,
        on_tool: OnToolStart | None = None,
    ) -> Reply:
        """Open an API session (one consultation per session id) and answer round 1."""
        session_id = await self.open_session(
            text,
            max_rounds=max_rounds,
            system_prompt=system_prompt,
            options=options,
            memory=memory,
            payer=payer,
        )
        return await self.continue_session(
            session_id, text, on_text=on_text, images=images, payer=payer, on_tool=on_tool
        )

    async def continue_session(
        self,
        session_id: str,
        text: str,
        *,
        on_text: OnText | None = None,
        images: Sequence[Image] = (),
        turn_id: str | None = None,
        answers: Sequence[Answer] = (),
        payer: Payer | None = None,
        on_tool: OnToolStart | None = None,
    ) -> Reply:
        """Answer the next round of an API session (`images`: this round's, as in `ask`),
        its usage charged to the session and `payer`; `on_tool` hears each tool call start.

        `answers` answer the session's last structured round, before `text`, as the
        message's question–answer pairs (`core.turns.round_answers.user_message_text`; `text`
        may then be empty). A message already stored with `turn_id` is not stored again: its stored
        reply is replayed, or its open turn answered (`Answerer.answer_again`)."""
        if not answers:
            text = require_text(text)
        async with self._turn(self.key(session_id)):
            found = await self._find_turn(session_id, turn_id)
            if found is not None:
                return await self._answerer.answer_again(
                    found,
                    is_group=False,
                    on_text=on_text,
                    images=images,
                    payer=payer,
                    on_tool=on_tool,
                )
            consultation = await self._usable_session(session_id)
            text, _ = user_message_text(consultation, text, answers, author=None)
            # A session under way is finished, never cut: over a limit, this is its answer.
            # Its first round is answered under the hold taken when it was opened.
            admission = self._opened.pop(session_id, None) or await self._quotas.admit(
                payer, Stage.CONTINUE, turn_tokens(text, self._config.max_tokens)
            )
            verdict = admission.verdict
            async with holding(admission.held):
                await self._user_turns.add_message(consultation, text, None, self._clock(), turn_id)
                return await self._answerer.answer(
                    consultation,
                    is_group=False,
                    on_text=on_text,
                    notices=set(),
                    images=images,
                    payer=payer,
                    over_quota=verdict.hit if verdict.finish else None,
                    on_tool=on_tool,
                )

    async def open_session(
        self,
        text: str,
        *,
        max_rounds: int = 1,
        system_prompt: str | None = None,
        options: ModelOptions | None = None,
        turn_id: str | None = None,
        memory: MemoryScope | None = None,
        payer: Payer | None = None,
    ) -> str:
        """Create an API session holding `text` (stored with `turn_id`) as its open turn,
        without calling the model; refused with `QuotaExceeded` (nothing stored) when
        `payer` may start no consultation now, else counted as `payer`'s start, its
        first round's tokens held for `continue_session` (`core.turns.quota_holds`; a hold
        never used stops counting at its expiry).

        The HTTP API then answers it with `continue_session(id, text, turn_id=…)` (the
        open turn is not stored twice), so a model failure on round 1 can still name the
        session the client may retry.
        """
        text = require_text(text)
        if max_rounds < 1:
            raise InvalidMaxRounds("maxRounds must be at least 1")
        tokens = turn_tokens(text, self._config.max_tokens)
        admission = await self._quotas.admit(payer, Stage.START, tokens)
        try:
            session_id = await self._create(
                text, max_rounds, system_prompt, options, turn_id, memory, payer, admission
            )
        except BaseException:
            if admission.held is not None:
                await admission.held.release()
            raise
        self._opened[session_id] = admission
        while len(self._opened) > MAX_OPENED:  # ones never answered: their holds expire
            self._opened.pop(next(iter(self._opened)))
        return session_id

    async def _create(
        self,
        text: str,
        max_rounds: int,
        system_prompt: str | None,
        options: ModelOptions | None,
        turn_id: str | None,
        memory: MemoryScope | None,
        payer: Payer | None,
        admission: Admission,
    ) -> str:
        """Store the new session, its start counted within the admission's limit."""
        owner, facts = await opening(self._store, self._config, memory)
        session_id = str(uuid.uuid4())
        now = self._clock()
        create = self._store.create(
            Consultation(
                id=session_id,
                chat_key=self.key(session_id),
                max_rounds=max_rounds,
                initial_request=text,
                created_at=now,
                last_activity_at=now,
                role=self._config.default_role,
                # The request's own, else the bot's instruction (None: the role's persona).
                system_prompt=(
                    system_prompt if system_prompt is not None else self._config.default_instruction
                ),
                options=options or ModelOptions(),
                memory_owner=owner,
                memory_facts=facts,
                person=asker_of(payer, memory),
                messages=[Message(Role.USER, text, now, turn_id=turn_id)],
            ),
            starter=payer.person if payer is not None else None,
            start_limit=admission.start_limit,
        )
        try:
            await create
        except StartRefused as refused:
            raise self._quotas.start_refused(admission, refused) from None
        return session_id

    async def get_session(self, session_id: str) -> Consultation:
        """An API session as stored, whatever its status, to read back (never changes it).

        One idle past the TTL shows as EXPIRED even before the cleanup marks it so.
        """
        consultation = await self._stored_session(session_id)
        if consultation.status is Status.ACTIVE and is_expired(
            consultation, now=self._clock(), ttl_seconds=self._config.session_ttl_seconds
        ):
            consultation.status = Status.EXPIRED
        return consultation

    async def replay(self, session_id: str, turn_id: str) -> Reply | None:
        """The reply that answered the session's message stored with `turn_id`, as
        `replay_of` gives it back; None when no such message is stored or it is still
        unanswered. Never changes the session, whatever its status."""
        found = await self._find_turn(session_id, turn_id)
        if found is None or found.reply is None:
            return None
        return self._answerer.replay(found)

    async def check_session(self, session_id: str) -> Consultation:
        """The API session if it can take another round; raises like `continue_session`."""
        async with self._locks.hold(self.key(session_id)):
            return await self._usable_session(session_id)

    async def set_session_max_rounds(self, session_id: str, value: int) -> int:
        """Change an API session's round limit (like /rounds); returns the limit applied.

        A limit at or below the rounds already used makes the next reply the final one;
        it is raised to that round, so a reply never shows a round above its limit.
        """
        if value < 1:
            raise InvalidMaxRounds("maxRounds must be at least 1")
        async with self._locks.hold(self.key(session_id)):
            consultation = await self._usable_session(session_id)
            applied = max(value, consultation.current_round + 1)
            if applied != consultation.max_rounds:
                await self._store.set_max_rounds(consultation.id, applied)
            return applied

    async def _usable_session(self, session_id: str) -> Consultation:
        """Load an active, unexpired API session (the caller holds its lock)."""
        consultation = await self._stored_session(session_id)
        if consultation.status is Status.COMPLETE:
            raise DialogCompleted("the dialog is already complete")
        if consultation.status is not Status.ACTIVE:
            raise SessionNotFound("session not found")
        now = self._clock()
        if is_expired(consultation, now=now, ttl_seconds=self._config.session_ttl_seconds):
            await self._store.set_status(consultation.id, Status.EXPIRED, at=now)
            raise SessionNotFound("session expired")
        return consultation

    async def _find_turn(self, session_id: str, turn_id: str | None) -> TurnRecord | None:
        """The session's message stored with `turn_id` and where its turn stands."""
        if turn_id is None:
            return None
        found, _ = await self._store.load_turn(self.key(session_id), turn_id)
        return found

    async def _stored_session(self, session_id: str) -> Consultation:
        """The API session as stored; a chat's consultation is never found by session id."""
        consultation = await self._store.get(session_id)
        if consultation is None or not consultation.chat_key.startswith(self._range):
            raise SessionNotFound("session not found")
        return consultation
