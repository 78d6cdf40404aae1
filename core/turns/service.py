"""The consultation service: runs a chat's turns for the Telegram bot, the HTTP API and
the consoles (`Engine.turns`, `core.turns.engine`).

It runs a chat's turns (a message, the final answer now, a follow-up, a retry, an option
picked), holds the chat's turn lock and tells where the chat stands (`status`); the
parts of a turn are its collaborators', which it receives from `core.turns.engine`:
`core.turns.user_turns` (the consultation a message goes to, and the message committed
before the model is called), `core.turns.answering` (the model's reply, stored once) and
`core.turns.follow_ups`. What else the edges ask (sessions, lifecycle, history, settings,
figures, quotas, memory) are the engine's other collaborators.

Invariants it keeps:
- calls for one chat key run strictly one after another; other keys run in parallel;
- a running turn can be stopped (`RunningTurns.stop`, which `Engine.lifecycle` calls
  before it ends or deletes a consultation): it then stores no reply and raises
  `TurnCancelled`;
- a turn with a turn id (the update it came from) is in the history once however often
  it is handled: it is looked up before anything is stored, and found, answered as
  `Answerer.answer_again` says (a follow-up's as `FollowUps.again` says). Without a
  turn id nothing is looked up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.domain.asking import RoundRef, UserMessage
from core.domain.attachments import Image
from core.domain.clarifying import ClarifyingRound, Picks
from core.domain.consultation import Consultation
from core.domain.errors import AnswerStale, NoActiveConsultation, NothingToRetry
from core.domain.facts import MemoryScope
from core.domain.outcomes import Notice, Reply, StatusInfo
from core.domain.ports import ConsultationStore, OnText
from core.domain.quotas import Stage, StartRefused
from core.domain.tools import OnToolStart
from core.domain.usage import Payer
from core.prompting.final_now import request_text, user_language
from core.prompting.prompts import PromptLibrary
from core.prompting.requests import EngineConfig, model_of
from core.prompting.rounds import has_open_turn, is_expired
from core.turns.answering import Answerer
from core.turns.follow_ups import FollowUps, is_follow_up
from core.turns.memories import opening
from core.turns.quota_checks import Admission, Quotas
from core.turns.quota_holds import holding, turn_tokens
from core.turns.round_answers import picked, user_message_text
from core.turns.running import TurnGate
from core.turns.user_turns import UserTurns, asker_of, require_text


@dataclass(frozen=True, slots=True)
class _Start:
    """A message that starts its chat's consultation."""

    chat_key: str
    text: str
    author: str | None
    author_id: int | None
    now: float
    turn_id: str | None


class ConsultationService:
    """A chat's turns, for any chat key."""

    def __init__(
        self,
        store: ConsultationStore,
        prompts: PromptLibrary,
        config: EngineConfig,
        *,
        clock: Callable[[], float],
        gate: TurnGate,
        user_turns: UserTurns,
        answerer: Answerer,
        follow_ups: FollowUps,
        quotas: Quotas,
    ) -> None:
        """The collaborators are the engine's (`core.turns.engine.build_engine`): `gate`
        holds a chat's lock for each whole turn, `quotas` admits each turn's model call."""
        self._store = store
        self._prompts = prompts
        self._config = config
        self._clock = clock
        self._gate = gate
        self._user_turns = user_turns
        self._answerer = answerer
        self._follow_ups = follow_ups
        self._quotas = quotas

    # -- chat consultations (Telegram, terminal) ------------------------------------------

    async def ask(self, message: UserMessage) -> Reply:
        """Advance the chat's consultation with a user message (starting one if needed).

        `message.text` is the turn as stored; handled again, the update `message.turn_id`
        names does not make a second turn (see `Answerer.answer_again`).

        After a structured round the user's message is the answers
        (`core.turns.round_answers.user_message_text`): the options picked so far, `answers`,
        then `text` (which may then be empty). `ref`
        names the round a press answers: another one is `AnswerStale`, nothing stored.
        """
        m = message
        chat_key, text, author, payer = m.chat_key, m.text, m.author, m.payer
        is_group, on_text, images = m.is_group, m.on_text, m.images
        if not m.answers and m.ref is None:
            text = require_text(text)  # refused before waiting for the chat
        async with self._gate.hold(chat_key):
            found, active = await self._store.load_turn(chat_key, m.turn_id)
            if found is not None:
                return await self._answerer.answer_again(
                    found,
                    is_group=is_group,
                    on_text=on_text,
                    images=images,
                    payer=payer,
                    on_tool=m.on_tool,
                )
            now = self._clock()
            live = active is not None and not is_expired(
                active, now=now, ttl_seconds=self._config.session_ttl_seconds
            )
            # Before anything is stored: a refusal leaves the chat as it was.
            stage = Stage.CONTINUE if live else Stage.START
            admission = await self._quotas.admit(payer, stage, self._turn_tokens(text))
            async with holding(admission.held):
                consultation, notices = await self._user_turns.vetted(chat_key, active, now)
                text, picks_used = user_message_text(
                    consultation, text, m.answers, author=author, ref=m.ref
                )
                if consultation is None:
                    started = _Start(chat_key, text, author, m.author_id, now, m.turn_id)
                    consultation, new = await self._start(started, m.memory, payer, admission)
                    if new:
                        notices.add(Notice.STARTED)
                else:
                    await self._user_turns.add_message(consultation, text, author, now, m.turn_id)
                    if picks_used:
                        await self._user_turns.clear_picks(consultation)
                verdict = admission.verdict
                return await self._answerer.answer(
                    consultation,
                    is_group=is_group,
                    on_text=on_text,
                    notices=notices,
                    images=images,
                    payer=payer,
                    over_quota=verdict.hit if verdict.finish else None,
                    on_tool=m.on_tool,
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
        payer: Payer | None = None,
        ref: RoundRef | None = None,
        on_tool: OnToolStart | None = None,
    ) -> Reply:
        """Give the final answer now, from whatever the consultation holds.

        The request stored as the user's message is in `language` (a code such as "ru": the
        user's interface language); without one, in the language the user has been writing
        in when that can be told, else in English. It is stored with `turn_id`, so the
        same update handled again does not ask twice (`Answerer.answer_again`). When the open
        turn already holds the user's messages nothing is stored and the id is not kept:
        handled again, that update is like a new request for the answer (refused with
        `NoActiveConsultation` once the answer was given). `ref` names the round whose
        button asked for it: when that is not the active consultation's current round, it is
        `AnswerStale` and nothing is stored.
        """
        async with self._gate.hold(chat_key):
            found, active = await self._store.load_turn(chat_key, turn_id)
            if found is not None:
                return await self._answerer.answer_again(
                    found,
                    is_group=is_group,
                    on_text=on_text,
                    final_requested=True,
                    payer=payer,
                    on_tool=on_tool,
                )
            now = self._clock()
            consultation, notices = await self._user_turns.vetted(chat_key, active, now)
            if ref is not None and (consultation is None or not ref.names(consultation)):
                raise AnswerStale("the round pressed is no longer the current one")
            if consultation is None:
                raise NoActiveConsultation("there is no consultation to finish")
            if not has_open_turn(consultation):
                language = language or user_language(consultation, self._prompts)
                request = request_text(self._prompts, language)
                # Options already picked go with the request: the answer must see them.
                request, picks_used = user_message_text(consultation, request, (), author=author)
                await self._user_turns.add_message(consultation, request, author, now, turn_id)
                if picks_used:
                    await self._user_turns.clear_picks(consultation)
            # Never refused, but held like any call: others see it while it runs.
            admission = await self._quotas.admit(payer, Stage.CONTINUE, self._turn_tokens(""))
            async with holding(admission.held):
                return await self._answerer.answer(
                    consultation,
                    is_group=is_group,
                    on_text=on_text,
                    notices=notices,
                    final_requested=True,
                    payer=payer,
                    on_tool=on_tool,
                )

    async def follow_up(
        self,
        chat_key: str,
        text: str,
        *,
        consultation_id: str | None = None,
        author: str | None = None,
        is_group: bool = False,
        on_text: OnText | None = None,
        turn_id: str | None = None,
        images: Sequence[Image] = (),
        payer: Payer | None = None,
        on_tool: OnToolStart | None = None,
    ) -> Reply:
        """Ask a follow-up about a finished consultation: `consultation_id` (the chat's
        own; its hyphens may be left out), else the chat's newest. Answered directly
        (`core.turns.follow_ups`), stored in that consultation, using no round; the reply is
        final and says which follow-up it answered and how many remain.

        `FollowUpUnavailable` says why the consultation takes none (not found, not
        complete, expired, limit reached, disabled), nothing stored. `turn_id` makes the
        same update one follow-up however often it is handled; a reset stops it like a
        turn. In groups any member may ask; the consultation keeps who started it.
        """
        text = require_text(text)  # refused before waiting for the chat
        async with self._gate.hold(chat_key):
            found, _ = await self._store.load_turn(chat_key, turn_id)
            if found is not None:
                if is_follow_up(found):
                    return await self._follow_ups.again(
                        found,
                        is_group=is_group,
                        on_text=on_text,
                        replay=self._answerer.replay,
                        images=images,
                        payer=payer,
                        on_tool=on_tool,
                    )
                return await self._answerer.answer_again(
                    found,
                    is_group=is_group,
                    on_text=on_text,
                    images=images,
                    payer=payer,
                    on_tool=on_tool,
                )
            consultation = await self._follow_ups.target(chat_key, consultation_id)
            admission = await self._quotas.admit(payer, Stage.FOLLOW_UP, self._turn_tokens(text))
            async with holding(admission.held):
                return await self._follow_ups.ask(
                    consultation,
                    text,
                    author=author,
                    is_group=is_group,
                    on_text=on_text,
                    turn_id=turn_id,
                    images=images,
                    payer=payer,
                    on_tool=on_tool,
                )

    async def admits(self, chat_key: str, payer: Payer | None, *, follow_up: bool = False) -> None:
        """Raise `QuotaExceeded` when a turn (or a follow-up) of `payer` in the chat would be
        refused now, so an edge can refuse before it reads a file (a transcription, a
        document); the turn itself is checked again when it runs."""
        stage = Stage.FOLLOW_UP
        if not follow_up:
            active = await self._store.load_active(chat_key)
            live = active is not None and not is_expired(
                active, now=self._clock(), ttl_seconds=self._config.session_ttl_seconds
            )
            stage = Stage.CONTINUE if live else Stage.START
        await self._quotas.require(payer, stage)

    async def pick(
        self, chat_key: str, ref: RoundRef, question: int, option: int, *, by: str | None = None
    ) -> tuple[ClarifyingRound, Picks]:
        """Choose option `option` of `question` for the round `ref` names, or unchoose it
        (`core.turns.round_answers.picked`); the round and the picks now kept. Sent with the
        chat's next turn. `AnswerStale` or `AnswerInvalid` change nothing."""
        async with self._gate.locks.hold(chat_key):
            consultation, _ = await self._user_turns.active_or_none(chat_key, self._clock())
            found, picks = picked(consultation, ref, question, option, by)
            assert consultation is not None  # picked raised otherwise
            await self._store.save_picks(consultation.id, picks)
            return found, picks

    async def retry(
        self,
        chat_key: str,
        *,
        is_group: bool = False,
        on_text: OnText | None = None,
        payer: Payer | None = None,
        on_tool: OnToolStart | None = None,
    ) -> Reply:
        """Answer the open turn again (after a model failure)."""
        async with self._gate.hold(chat_key):
            consultation, notices = await self._user_turns.active_or_none(chat_key, self._clock())
            if consultation is None or not has_open_turn(consultation):
                raise NothingToRetry("no message is waiting for an answer")
            admission = await self._quotas.admit(payer, Stage.CONTINUE, self._turn_tokens(""))
            verdict = admission.verdict
            async with holding(admission.held):
                return await self._answerer.answer(
                    consultation,
                    is_group=is_group,
                    on_text=on_text,
                    notices=notices,
                    payer=payer,
                    over_quota=verdict.hit if verdict.finish else None,
                    on_tool=on_tool,
                )

    async def status(self, chat_key: str, payer: Payer | None = None) -> StatusInfo:
        """Where the chat stands, its model as it applies to `payer` (with their plan's
        models); it reads without waiting for a running turn."""
        config = await self._answerer.config_for(payer)
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
            model = model_of(settings.model, config)
            return StatusInfo(max_rounds=max_rounds, role=role, active=False, model=model)
        return StatusInfo(
            model=model_of(consultation.options.model, config),
            answering=self._gate.running.is_running(chat_key),
            max_rounds=consultation.max_rounds,
            role=consultation.role or role,
            active=True,
            rounds_done=consultation.current_round,
            open_turn=has_open_turn(consultation),
            initial_request=consultation.initial_request,
            last_activity_at=consultation.last_activity_at,
            started_by=consultation.started_by,
        )

    # -- internals -------------------------------------------------------------------------

    async def _start(
        self, start: _Start, memory: MemoryScope | None, payer: Payer | None, admission: Admission
    ) -> tuple[Consultation, bool]:
        """Start the chat's consultation (`UserTurns.start`: True when this call started
        it), counted as the payer's within the admission's limit or refused."""
        remembered = await opening(self._store, self._config, memory)
        try:
            return await self._user_turns.start(
                start.chat_key,
                start.text,
                start.author,
                start.author_id,
                start.now,
                start.turn_id,
                memory=remembered,
                starter=payer.person if payer is not None else None,
                person=asker_of(payer, memory),
                start_limit=admission.start_limit,
            )
        except StartRefused as refused:
            raise self._quotas.start_refused(admission, refused) from None

    def _turn_tokens(self, text: str) -> int:
        """What a turn with `text` is reserved before its first request is built."""
        return turn_tokens(text, self._config.max_tokens)
