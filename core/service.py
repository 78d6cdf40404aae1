"""The consultation service: the one seam the Telegram bot and the HTTP API call.

Invariants it keeps:
- calls for one chat key run strictly one after another; other keys run in parallel;
- the user's message is committed to the store before the model is called;
- a round is consumed only when a reply was stored; a failed call leaves the message
  as the open turn, and an identical resend is not stored twice;
- a reset never waits for the model: it stops the chat's running turn (which then
  stores no reply and raises `TurnCancelled`) and takes the chat's lock next;
- another writer on the same store (another process, whose locks this one cannot see)
  is settled by the store: a consultation it started first is joined, not duplicated;
  a round it answered first is not answered again (`TurnSuperseded`, nothing stored);
- a turn with a turn id (the update it came from) is in the history once however often
  it is handled: handled again, an answered turn gets its stored reply back
  (`Reply.replayed`, no model call, nothing stored), an unanswered one in the open turn
  is answered without storing it again, and one its consultation moved on from raises
  `TurnAlreadyHandled`. Without a turn id nothing is looked up;
- images reach the model only in the round they came with (the store keeps the turn's
  text, with a [photo] placeholder); a model that refuses them is asked the same round
  again without them, and the reply says so (`Notice.IMAGES_NOT_SEEN`): one round, one
  stored reply, not a failure.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from core.answer_schema import follows_schema
from core.attachments import Image
from core.blank import is_blank
from core.collect import CollectedAnswer, collect_answer
from core.errors import (
    ActiveConsultationExists,
    DialogCompleted,
    EmptyMessage,
    InvalidMaxRounds,
    ModelError,
    ModelErrorKind,
    NoActiveConsultation,
    NothingToRetry,
    SessionNotFound,
    TurnAlreadyHandled,
    UnknownRole,
)
from core.final_now import request_text, user_language
from core.models import (
    ChatSettings,
    Consultation,
    Message,
    ModelOptions,
    Role,
    Status,
    TurnRecord,
)
from core.outcomes import Notice, Reply, RoundsChange, StatusInfo, replay_of
from core.ports import ChatLocks, Completer, CompletionRequest, ConsultationStore
from core.prompts import (
    PromptLibrary,
    RoleInfo,
    strip_marker,
)
from core.requests import EngineConfig, answer_max_tokens, build_completion_request
from core.rounds import (
    Turn,
    after_reply,
    append_user_message,
    has_open_turn,
    is_duplicate_of_open_turn,
    is_expired,
    plan_turn,
    validate_max_rounds,
)
from core.running import RunningTurns, StoppableCompleter
from core.streaming import MarkerFilter

OnText = Callable[[str], Awaitable[None]]
"""Receives the whole reply text shown so far, each time it grows."""

API_KEY_PREFIX = "api:"

_START_ATTEMPTS = 3
"""Creating a consultation is refused while another writer's is active; if that one ends
before it can be joined, starting is tried again, this many times in all."""


class ConsultationService:
    def __init__(
        self,
        store: ConsultationStore,
        completer: Completer,
        prompts: PromptLibrary,
        config: EngineConfig,
        *,
        locks: ChatLocks,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`locks` orders the calls for one chat key (`core.keyed_lock.KeyedLock` within one
        process); the service holds a key's lock for each whole turn."""
        self._store = store
        self._running = RunningTurns()
        self._completer = StoppableCompleter(completer)
        self._prompts = prompts
        self._config = config
        self._clock = clock
        self._locks = locks

    @property
    def config(self) -> EngineConfig:
        return self._config

    # -- chat consultations (Telegram, console) -------------------------------------------

    async def ask(
        self,
        chat_key: str,
        text: str,
        *,
        author: str | None = None,
        author_id: int | None = None,
        is_group: bool = False,
        on_text: OnText | None = None,
        turn_id: str | None = None,
        images: Sequence[Image] = (),
    ) -> Reply:
        """Advance the chat's consultation with a user message (starting one if needed).

        `text` is the turn as stored (`TurnInput.stored_text`); `images` reach the model in
        this round's request only. `turn_id` names the update the message came from;
        handled again, that update does not make a second turn (see `_handled_again`).
        """
        text = _require_text(text)
        async with self._turn(chat_key):
            found, active = await self._store.load_turn(chat_key, turn_id)
            if found is not None:
                return await self._handled_again(
                    found, is_group=is_group, on_text=on_text, images=images
                )
            now = self._clock()
            consultation, notices = await self._vetted(chat_key, active, now)
            if consultation is None:
                consultation, started = await self._start(
                    chat_key, text, author, author_id, now, turn_id
                )
                if started:
                    notices.add(Notice.STARTED)
            else:
                await self._add_user_message(consultation, text, author, now, turn_id)
            return await self._answer(
                consultation, is_group=is_group, on_text=on_text, notices=notices, images=images
            )

    async def answer_now(
        self,
        chat_key: str,
        *,
        author: str | None = None,
        is_group: bool = False,
        on_text: OnText | None = None,
        language: str | None = None,
        turn_id: str | None = None,
    ) -> Reply:
        """Give the final answer now, from whatever the consultation holds.

        The request stored as the user's turn is in `language` (a code such as "ru": the
        user's interface language); without one, in the language the user has been writing
        in when that can be told, else in English. It is stored with `turn_id`, so the
        same update handled again does not ask twice (`_handled_again`). When the open
        turn already holds the user's messages nothing is stored and the id is not kept:
        handled again, that update is like a new request for the answer (refused with
        `NoActiveConsultation` once the answer was given).
        """
        async with self._turn(chat_key):
            found, active = await self._store.load_turn(chat_key, turn_id)
            if found is not None:
                return await self._handled_again(
                    found, is_group=is_group, on_text=on_text, final_requested=True
                )
            now = self._clock()
            consultation, notices = await self._vetted(chat_key, active, now)
            if consultation is None:
                raise NoActiveConsultation("there is no consultation to finish")
            if not has_open_turn(consultation):
                language = language or user_language(consultation, self._prompts)
                request = request_text(self._prompts, language)
                await self._add_user_message(consultation, request, author, now, turn_id)
            return await self._answer(
                consultation,
                is_group=is_group,
                on_text=on_text,
                notices=notices,
                final_requested=True,
            )

    async def retry(
        self, chat_key: str, *, is_group: bool = False, on_text: OnText | None = None
    ) -> Reply:
        """Answer the open turn again (after a model failure)."""
        async with self._turn(chat_key):
            consultation, notices = await self._active_or_none(chat_key, self._clock())
            if consultation is None or not has_open_turn(consultation):
                raise NothingToRetry("no message is waiting for an answer")
            return await self._answer(
                consultation, is_group=is_group, on_text=on_text, notices=notices
            )

    async def reset(self, chat_key: str) -> bool:
        """End the active consultation, stopping a reply being written; True when there was one.

        The stop happens before waiting for the chat, so the reset is next in line
        for it: a turn that arrives after the reset starts a new consultation.
        """
        self._running.stop(chat_key)
        async with self._locks.hold(chat_key):
            consultation = await self._store.load_active(chat_key)
            if consultation is None:
                return False
            await self._store.set_status(consultation.id, Status.RESET, at=self._clock())
            return True

    async def set_max_rounds(self, chat_key: str, value: int) -> RoundsChange:
        """Set the chat's round limit; it applies to the active consultation too."""
        limit = self._config.max_rounds_limit
        if not validate_max_rounds(value, limit=limit):
            raise InvalidMaxRounds(f"rounds must be between 1 and {limit}")
        async with self._locks.hold(chat_key):
            settings = await self._store.load_chat_settings(chat_key)
            await self._store.save_chat_settings(chat_key, _replace(settings, max_rounds=value))
            consultation, _ = await self._active_or_none(chat_key, self._clock())
            if consultation is None:
                return RoundsChange(value, active=False, rounds_done=0, next_is_final=value == 1)
            await self._store.set_max_rounds(consultation.id, value)
            done = consultation.current_round
            return RoundsChange(
                value, active=True, rounds_done=done, next_is_final=done + 1 >= value
            )

    async def set_role(
        self, chat_key: str, role: str | None, system_prompt: str | None = None
    ) -> None:
        """Choose the persona (or a custom system prompt) for the chat's next consultations.

        Raises `UnknownRole` for a role the prompt library does not have."""
        if role is not None and role not in self._prompts.roles():
            raise UnknownRole(f"unknown role {role!r}")
        async with self._locks.hold(chat_key):
            settings = await self._store.load_chat_settings(chat_key)
            await self._store.save_chat_settings(
                chat_key, _replace(settings, role=role, system_prompt=system_prompt)
            )

    async def chat_settings(self, chat_key: str) -> ChatSettings:
        return await self._store.load_chat_settings(chat_key)

    async def status(self, chat_key: str) -> StatusInfo:
        """Where the chat stands; it reads without waiting for a running turn."""
        settings = await self._store.load_chat_settings(chat_key)
        consultation = await self._store.load_active(chat_key)
        now = self._clock()
        if consultation is not None and is_expired(
            consultation, now=now, ttl_seconds=self._config.session_ttl_seconds
        ):
            consultation = None
        max_rounds = settings.max_rounds or self._config.default_max_rounds
        role = settings.role or self._config.default_role
        if consultation is None:
            return StatusInfo(max_rounds=max_rounds, role=role, active=False)
        return StatusInfo(
            answering=self._running.is_running(chat_key),
            max_rounds=consultation.max_rounds,
            role=consultation.role or role,
            active=True,
            rounds_done=consultation.current_round,
            open_turn=has_open_turn(consultation),
            initial_request=consultation.initial_request,
            last_activity_at=consultation.last_activity_at,
            started_by=consultation.started_by,
        )

    async def move_chat(self, old_key: str, new_key: str) -> int:
        """Carry a chat's consultation and settings over to its new key."""
        async with self._locks.hold(old_key), self._locks.hold(new_key):
            return await self._store.move_chat(old_key, new_key)

    def roles(self) -> dict[str, RoleInfo]:
        return self._prompts.roles()

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

    # -- API sessions ----------------------------------------------------------------------

    async def start_session(
        self,
        text: str,
        *,
        max_rounds: int = 1,
        system_prompt: str | None = None,
        options: ModelOptions | None = None,
        on_text: OnText | None = None,
        images: Sequence[Image] = (),
    ) -> Reply:
        """Open an API session (one consultation per session id) and answer round 1."""
        session_id = await self.open_session(
            text, max_rounds=max_rounds, system_prompt=system_prompt, options=options
        )
        return await self.continue_session(session_id, text, on_text=on_text, images=images)

    async def continue_session(
        self,
        session_id: str,
        text: str,
        *,
        on_text: OnText | None = None,
        images: Sequence[Image] = (),
    ) -> Reply:
        """Answer the next round of an API session (`images`: this round's, as in `ask`)."""
        text = _require_text(text)
        async with self._turn(API_KEY_PREFIX + session_id):
            consultation = await self._usable_session(session_id)
            await self._add_user_message(consultation, text, None, self._clock())
            return await self._answer(
                consultation, is_group=False, on_text=on_text, notices=set(), images=images
            )

    async def open_session(
        self,
        text: str,
        *,
        max_rounds: int = 1,
        system_prompt: str | None = None,
        options: ModelOptions | None = None,
    ) -> str:
        """Create an API session holding `text` as its open turn, without calling the model.

        The HTTP API then answers it with `continue_session(id, text)` (the identical open
        turn is not stored twice), so a model failure on round 1 can still name the
        session the client may retry.
        """
        text = _require_text(text)
        if max_rounds < 1:
            raise InvalidMaxRounds("maxRounds must be at least 1")
        session_id = str(uuid.uuid4())
        now = self._clock()
        await self._store.create(
            Consultation(
                id=session_id,
                chat_key=API_KEY_PREFIX + session_id,
                max_rounds=max_rounds,
                initial_request=text,
                created_at=now,
                last_activity_at=now,
                role=self._config.default_role,
                system_prompt=system_prompt,
                options=options or ModelOptions(),
                messages=[Message(Role.USER, text, now)],
            )
        )
        return session_id

    async def get_session(self, session_id: str) -> Consultation:
        """An API session as stored, whatever its status, to read back (never changes it).

        One idle past the TTL shows as EXPIRED even before the cleanup marks it so.
        """
        consultation = await self._store.get(session_id)
        if consultation is None or not consultation.chat_key.startswith(API_KEY_PREFIX):
            raise SessionNotFound("session not found")
        if consultation.status is Status.ACTIVE and is_expired(
            consultation, now=self._clock(), ttl_seconds=self._config.session_ttl_seconds
        ):
            consultation.status = Status.EXPIRED
        return consultation

    async def check_session(self, session_id: str) -> Consultation:
        """The API session if it can take another round; raises like `continue_session`."""
        async with self._locks.hold(API_KEY_PREFIX + session_id):
            return await self._usable_session(session_id)

    async def set_session_max_rounds(self, session_id: str, value: int) -> int:
        """Change an API session's round limit (like /rounds); returns the limit applied.

        A limit at or below the rounds already used makes the next reply the final one;
        it is raised to that round, so a reply never shows a round above its limit.
        """
        if value < 1:
            raise InvalidMaxRounds("maxRounds must be at least 1")
        async with self._locks.hold(API_KEY_PREFIX + session_id):
            consultation = await self._usable_session(session_id)
            applied = max(value, consultation.current_round + 1)
            if applied != consultation.max_rounds:
                await self._store.set_max_rounds(consultation.id, applied)
            return applied

    async def _usable_session(self, session_id: str) -> Consultation:
        """Load an active, unexpired API session (the caller holds its lock)."""
        consultation = await self._store.get(session_id)
        if consultation is None or not consultation.chat_key.startswith(API_KEY_PREFIX):
            raise SessionNotFound("session not found")
        if consultation.status is Status.COMPLETE:
            raise DialogCompleted("the dialog is already complete")
        if consultation.status is not Status.ACTIVE:
            raise SessionNotFound("session not found")
        now = self._clock()
        if is_expired(consultation, now=now, ttl_seconds=self._config.session_ttl_seconds):
            await self._store.set_status(consultation.id, Status.EXPIRED, at=now)
            raise SessionNotFound("session expired")
        return consultation

    # -- internals -------------------------------------------------------------------------

    @asynccontextmanager
    async def _turn(self, key: str) -> AsyncIterator[None]:
        """Hold the chat's lock as a turn that `reset` may stop."""
        async with self._locks.hold(key):
            with self._running.turn(key):
                yield

    async def _active_or_none(
        self, chat_key: str, now: float
    ) -> tuple[Consultation | None, set[Notice]]:
        return await self._vetted(chat_key, await self._store.load_active(chat_key), now)

    async def _vetted(
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

    async def _start(
        self,
        chat_key: str,
        text: str,
        author: str | None,
        author_id: int | None,
        now: float,
        turn_id: str | None,
    ) -> tuple[Consultation, bool]:
        """Start the chat's consultation with `text`; True when this call started it.

        Another writer (another process) may have started one since this turn found
        none: the store refuses a second ACTIVE one, and the message joins that one
        instead, as it would have had it been seen in time (False: no STARTED notice).
        """
        for _ in range(_START_ATTEMPTS):
            try:
                return await self._create(chat_key, text, author, author_id, now, turn_id), True
            except ActiveConsultationExists:
                existing = await self._store.load_active(chat_key)
            if existing is not None:  # else it ended meanwhile: try to start one again
                await self._add_user_message(existing, text, author, now, turn_id)
                return existing, False
        raise ActiveConsultationExists(chat_key)

    async def _create(
        self,
        chat_key: str,
        text: str,
        author: str | None,
        author_id: int | None,
        now: float,
        turn_id: str | None,
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
            system_prompt=settings.system_prompt,
            started_by=author_id,
            messages=[Message(Role.USER, text, now, author=author, turn_id=turn_id)],
        )
        await self._store.create(consultation)
        return consultation

    async def _add_user_message(
        self,
        consultation: Consultation,
        text: str,
        author: str | None,
        now: float,
        turn_id: str | None = None,
    ) -> None:
        if is_duplicate_of_open_turn(consultation, text, author):
            return
        message = Message(Role.USER, text, now, author=author, turn_id=turn_id)
        await self._store.add_message(consultation.id, message, last_activity_at=now)
        append_user_message(consultation, message)

    async def _handled_again(
        self,
        found: TurnRecord,
        *,
        is_group: bool,
        on_text: OnText | None,
        final_requested: bool = False,
        images: Sequence[Image] = (),
    ) -> Reply:
        """A turn whose update was handled before (the caller holds the chat's lock).

        Answered: its stored reply, replayed; the model is not called, nothing is stored.
        Unanswered in the still active (unexpired) consultation, where it is part of the
        open turn: that turn is answered like a retry. Otherwise the consultation moved
        on without answering it (reset, expired, ended): `TurnAlreadyHandled`.
        """
        consultation = found.consultation
        if found.reply is not None:
            return replay_of(found, model=consultation.options.model or self._config.model)
        if consultation.status is not Status.ACTIVE or is_expired(
            consultation, now=self._clock(), ttl_seconds=self._config.session_ttl_seconds
        ):
            raise TurnAlreadyHandled(
                f"consultation {consultation.id} moved on without answering this turn"
            )
        return await self._answer(
            consultation,
            is_group=is_group,
            on_text=on_text,
            notices=set(),
            final_requested=final_requested,
            images=images,
        )

    async def _answer(
        self,
        consultation: Consultation,
        *,
        is_group: bool,
        on_text: OnText | None,
        notices: set[Notice],
        final_requested: bool = False,
        images: Sequence[Image] = (),
    ) -> Reply:
        turn = plan_turn(consultation, final_requested=final_requested)
        try:
            request, answer = await self._collect(consultation, turn, is_group, on_text, images)
        except ModelError as exc:
            if exc.kind is not ModelErrorKind.IMAGES_REJECTED:
                raise
            # The model reads text only: the same round without the images, told so.
            request, answer = await self._collect(
                consultation, turn, is_group, on_text, (), images_not_seen=True
            )
            notices.add(Notice.IMAGES_NOT_SEEN)
        text, marked = strip_marker(answer.text)
        if not text.strip():
            raise ModelError(ModelErrorKind.UNAVAILABLE, "the model returned an empty reply")
        early_finish = marked and not turn.is_final
        if not answer.complete:
            notices.add(Notice.ANSWER_INCOMPLETE)
        reply = Message(Role.ASSISTANT, text, self._clock(), usage=answer.usage)
        planned_from = consultation.current_round
        after_reply(consultation, turn, reply, early_finish=early_finish)
        # Compare-and-set: if another writer answered this round meanwhile, the store
        # keeps nothing of this turn and raises TurnSuperseded, which the caller gets.
        await self._store.record_reply(
            consultation.id,
            reply,
            expected_round=planned_from,
            current_round=consultation.current_round,
            status=consultation.status,
            last_activity_at=consultation.last_activity_at,
        )
        return Reply(
            text=text,
            consultation_id=consultation.id,
            round=turn.round,
            max_rounds=consultation.max_rounds,
            is_final=turn.is_final or early_finish,
            is_complete=consultation.status is Status.COMPLETE,
            model=answer.model or request.model,
            usage=answer.usage,
            notices=frozenset(notices),
            extras=answer.extras,
            json_valid=answer.json_valid,
            schema_valid=_schema_valid(answer, request.json_schema),
        )

    async def _collect(
        self,
        consultation: Consultation,
        turn: Turn,
        is_group: bool,
        on_text: OnText | None,
        images: Sequence[Image],
        *,
        images_not_seen: bool = False,
    ) -> tuple[CompletionRequest, CollectedAnswer]:
        """One model answer to `turn` (continued when cut off), and the request it was."""
        request = build_completion_request(
            consultation,
            turn,
            is_group=is_group,
            prompts=self._prompts,
            config=self._config,
            images=images,
            images_not_seen=images_not_seen,
        )
        shown = MarkerFilter(on_text) if on_text is not None else None
        answer = await collect_answer(
            self._completer,
            request,
            continuation_prompt=self._prompts.continuation,
            max_continuations=self._config.max_continuations,
            on_text=shown.feed if shown is not None else None,
            max_chars=self._config.max_answer_chars,
            # Only a final answer is continued; in a question round, an early final one.
            continue_if=None if turn.is_final else lambda text: strip_marker(text)[1],
            # Continued, it is the final answer (an early one too): the answer's budget.
            follow_up_max_tokens=answer_max_tokens(consultation, self._config),
        )
        return request, answer


def _schema_valid(answer: CollectedAnswer, schema: dict[str, Any] | None) -> bool | None:
    """Whether the final JSON follows the client's schema; None without a schema.

    Text that is no JSON at all does not follow it either."""
    if schema is None:
        return None
    return bool(answer.json_valid) and follows_schema(answer.json_value, schema)


def _require_text(text: str) -> str:
    if is_blank(text):  # zero-width and other invisible characters count as nothing
        raise EmptyMessage("the message is empty")
    return text


def _replace(settings: ChatSettings, **changes: object) -> ChatSettings:
    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]
