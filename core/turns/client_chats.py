"""Consultations held by stateless chat apps: each request carries the whole conversation
(`core.domain.client_history.Rebuilt`), and the server answers its last user turn.

Invariants it keeps:
- the client's history wins: the chat's latest stored consultation is continued only when
  it holds exactly what the client sent (its last user message stored with the key of the
  client's last user turn before this one, `Rebuilt.prior_key`, followed by the reply the
  client shows, and the same round, status and follow-ups; or all that followed by this
  very turn, unanswered after a failure, which is then answered without being stored
  twice); otherwise — an edited, branched or regenerated conversation, or one this server
  never saw — a consultation is stored anew from the client's history (the chat's active
  one reset first, once the turn was admitted: a refusal changes nothing), so nothing the
  server kept contradicts what the client sent;
- a consultation stored anew from a history without replies is a start (quotas: the
  payer's consultations of the day); one stored anew from a history that holds replies is
  no new start, but the token limits refuse it as they refuse a follow-up (`_stage`), so a
  made-up history never buys an answer past them;
- the user's turn is committed with its key before the model is called; the reply is
  stored as any turn's (`core.turns.answering`, `core.turns.follow_ups`), so usage, quotas,
  the console's transcripts and the stats see these consultations like any other;
- calls for one chat key run one after another (the chat's turn lock).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.domain.attachments import Image
from core.domain.client_history import Next, Rebuilt
from core.domain.consultation import Consultation, Message, Role, Status
from core.domain.facts import MemoryScope
from core.domain.outcomes import Reply
from core.domain.ports import ConsultationStore, OnText
from core.domain.quotas import Stage, StartRefused
from core.domain.round_markdown import round_body, round_markdown
from core.domain.tools import OnToolStart
from core.domain.usage import Payer
from core.prompting.final_now import request_text, user_language
from core.prompting.prompts import PromptLibrary
from core.prompting.requests import EngineConfig
from core.prompting.rounds import is_expired
from core.turns.answering import Answerer
from core.turns.follow_ups import FollowUps, unavailable_reason
from core.turns.memories import opening
from core.turns.quota_checks import Admission, Quotas
from core.turns.quota_holds import holding, turn_tokens
from core.turns.round_answers import user_message_text
from core.turns.running import TurnGate
from core.turns.user_turns import UserTurns, asker_of, require_text


@dataclass(frozen=True, slots=True)
class ClientTurn:
    """One request of a chat app: the conversation rebuilt, the persona it chose, who pays
    and whose client memory a consultation stored anew opens with. `chat_key` names the
    conversation (its client, user and first message)."""

    chat_key: str
    rebuilt: Rebuilt
    role: str
    payer: Payer | None = None
    memory: MemoryScope | None = None  # the person whose client memory it reaches
    images: Sequence[Image] = ()
    on_text: OnText | None = None
    on_tool: OnToolStart | None = None


class ClientChats:
    """Answers a stateless chat app's last user turn (see the module)."""

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
        self._store = store
        self._prompts = prompts
        self._config = config
        self._clock = clock
        self._gate = gate
        self._user_turns = user_turns
        self._answerer = answerer
        self._follow_ups = follow_ups
        self._quotas = quotas

    async def answer(self, turn: ClientTurn) -> Reply:
        """The reply to the conversation's last user turn: the next round, the final answer
        (at the limit, after `/answer`, or when the model is ready) or a follow-up's answer.

        Refusals before anything is stored: `QuotaExceeded`, `EmptyMessage`,
        `AnswerInvalid`."""
        rebuilt = turn.rebuilt
        if not rebuilt.answers and rebuilt.next is not Next.FINAL_NOW:
            require_text(rebuilt.text)
        async with self._gate.hold(turn.chat_key):
            now = self._clock()
            latest = await self._store.load_latest(turn.chat_key)
            found = latest if self._continues(latest, rebuilt, now) else None
            stage = _stage(rebuilt, found is not None)
            tokens = turn_tokens(rebuilt.message, self._config.max_tokens)
            # Before anything is stored or changed: a refusal leaves the chat as it was.
            admission = await self._quotas.admit(turn.payer, stage, tokens)
            async with holding(admission.held):
                if found is None:
                    if latest is not None and latest.status is Status.ACTIVE:
                        await self._store.set_status(latest.id, Status.RESET, at=now)
                    found = await self._stored_anew(turn, admission, stage, now)
                return await self._reply(found, turn, admission)

    def _continues(self, latest: Consultation | None, rebuilt: Rebuilt, now: float) -> bool:
        """Whether the chat's latest consultation holds exactly the client's history (see
        the module) and can take the turn now."""
        return latest is not None and _holds(latest, rebuilt) and self._usable(latest, rebuilt, now)

    def _usable(self, consultation: Consultation, rebuilt: Rebuilt, now: float) -> bool:
        """Whether the stored consultation can take the turn now (not expired; a follow-up
        within the limit)."""
        if rebuilt.complete:
            return unavailable_reason(consultation, now=now, config=self._config) is None
        return not is_expired(consultation, now=now, ttl_seconds=self._config.session_ttl_seconds)

    async def _stored_anew(
        self, turn: ClientTurn, admission: Admission, stage: Stage, now: float
    ) -> Consultation:
        """Store the consultation the client's history holds (without its last turn)."""
        rebuilt = turn.rebuilt
        messages = []
        for sent in rebuilt.history:
            text = sent.text
            if sent.final_now:
                text = request_text(self._prompts, None)
            messages.append(
                Message(sent.role, text, now, turn_id=sent.key or None, questions=sent.questions)
            )
        owner, facts = await opening(self._store, self._config, turn.memory)
        consultation = Consultation(
            id=str(uuid.uuid4()),
            chat_key=turn.chat_key,
            max_rounds=max(rebuilt.max_rounds, rebuilt.rounds_done),
            # A first message is the request as it is stored (its documents read into it).
            initial_request=rebuilt.request if rebuilt.history else rebuilt.text,
            created_at=now,
            last_activity_at=now,
            current_round=rebuilt.rounds_done,
            status=Status.COMPLETE if rebuilt.complete else Status.ACTIVE,
            role=turn.role,
            system_prompt=self._system_prompt(turn.role, rebuilt.instructions),
            follow_ups=rebuilt.follow_ups,
            memory_owner=owner,
            memory_facts=facts,
            person=asker_of(turn.payer, turn.memory),
            messages=messages,
        )
        counted = stage is Stage.START and turn.payer is not None
        try:
            await self._store.create(
                consultation,
                starter=turn.payer.person if counted and turn.payer is not None else None,
                start_limit=admission.start_limit,
            )
        except StartRefused as refused:
            raise self._quotas.start_refused(admission, refused) from None
        return consultation

    def _system_prompt(self, role: str, instructions: str | None) -> str | None:
        """The persona's text with the client's own instructions after it (None without
        any: the persona alone, as the prompts give it). A bot's own instruction
        (`EngineConfig.default_instruction`) stands for its default role's persona."""
        own = self._config.default_instruction if role == self._config.default_role else None
        if instructions is None:
            return own
        return f"{own or self._prompts.role_text(role)}\n\n{instructions}"

    async def _reply(
        self, consultation: Consultation, turn: ClientTurn, admission: Admission
    ) -> Reply:
        rebuilt = turn.rebuilt
        now = self._clock()
        if rebuilt.next is Next.FOLLOW_UP:
            return await self._follow_ups.ask(
                consultation,
                rebuilt.message,
                author=None,
                is_group=False,
                on_text=turn.on_text,
                turn_id=rebuilt.key,
                images=turn.images,
                payer=turn.payer,
                on_tool=turn.on_tool,
            )
        final_now = rebuilt.next is Next.FINAL_NOW
        if final_now:
            language = user_language(consultation, self._prompts)
            text, _ = user_message_text(
                consultation, request_text(self._prompts, language), (), author=None
            )
        else:
            text, _ = user_message_text(consultation, rebuilt.text, rebuilt.answers, author=None)
        await self._user_turns.add_message(consultation, text, None, now, rebuilt.key)
        verdict = admission.verdict
        return await self._answerer.answer(
            consultation,
            is_group=False,
            on_text=turn.on_text,
            notices=set(),
            final_requested=final_now,
            images=turn.images,
            payer=turn.payer,
            over_quota=verdict.hit if verdict.finish else None,
            on_tool=turn.on_tool,
        )


def _stage(rebuilt: Rebuilt, stored: bool) -> Stage:
    """The quota stage of the turn: a follow-up's; a stored consultation's next round; a
    new consultation's start (counted); or, for one stored anew from a history that already
    holds replies (edited, branched, regenerated), the follow-up's admission: the token
    limits apply, but it is no new consultation of the day."""
    if rebuilt.next is Next.FOLLOW_UP:
        return Stage.FOLLOW_UP
    if stored:
        return Stage.CONTINUE
    return Stage.START if rebuilt.rounds_done == 0 else Stage.FOLLOW_UP


def _holds(consultation: Consultation, rebuilt: Rebuilt) -> bool:
    """Whether the stored consultation is the client's history: the same state, its last
    user message stored with the key of the client's, then one reply that the client
    shows (its text starts the client's copy); or all that, then this very turn still
    unanswered (a model failure the client retries)."""
    status = Status.COMPLETE if rebuilt.complete else Status.ACTIVE
    if (consultation.status, consultation.current_round, consultation.follow_ups) != (
        status,
        rebuilt.rounds_done,
        rebuilt.follow_ups,
    ):
        return False
    messages = consultation.messages
    if messages and messages[-1].role is Role.USER:  # an open turn: this one, unanswered?
        if messages[-1].turn_id != rebuilt.key:
            return False
        messages = messages[:-1]
        if rebuilt.prior_key is None:
            return not messages
    if rebuilt.reply is None or rebuilt.prior_key is None:
        return False  # a first message starts a consultation of its own
    if len(messages) < 2 or messages[-1].role is not Role.ASSISTANT:
        return False
    asked = messages[-2]
    if asked.role is not Role.USER or asked.turn_id != rebuilt.prior_key:
        return False
    reply = messages[-1]
    shown = reply.text
    if reply.questions is not None:
        shown = round_body(round_markdown(reply.text, reply.questions))
    return _plain(round_body(rebuilt.reply)).startswith(_plain(shown))


def _plain(text: str) -> str:
    """`text` with every run of whitespace as one space: chat apps trim and rewrap."""
    return " ".join(text.split())
