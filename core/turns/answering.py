"""Answering a turn: the model's reply to the open turn, stored once.

Invariants it keeps:
- a round is consumed only when a reply was stored; a failed call leaves the message
  as the open turn, stored nothing, and raises;
- the reply is stored by compare-and-set: a round another writer (another process) answered
  first is not answered again (`TurnSuperseded`, nothing of this turn stored);
- images reach the model only in the round they came with (the store keeps the turn's
  text, with a [photo] placeholder); a model that refuses them is asked the same round
  again without them, and the reply says so (`Notice.IMAGES_NOT_SEEN`): one round, one
  stored reply, not a failure;
- a question round is asked as a structured reply while the endpoint gives one, in the
  form it takes (`core.domain.llm_format`, `core.prompting.clarifying_call`), its round
  stored with the reply; prose written instead is the reply, as a text round's would be
  (one call); one
  whose model said it knew enough is answered, in the same turn and as the same round, by
  the final answer (the round's call is counted in its usage; nothing of the round is
  stored);
- with a knowledge base, the turn reads its passages once (`core.turns.knowledge_reading`)
  and every model call of the turn is given them; a final answer's reply keeps the
  passages it cites (`core.domain.knowledge_sources.cited_sources`, named by the labels
  of the request it answered), a question round's none;
- a turn handled again (found by its turn id) is answered at most once: answered, its
  stored reply comes back (`Reply.replayed`, no model call, nothing stored); unanswered
  in the open turn, it is answered without storing the message again; one its
  consultation moved on from raises `TurnAlreadyHandled`;
- with tools (`core.turns.tooling`), the turn's model calls go through one tool loop
  (`core.llm.tool_loop`): the final answer and, with `tools_in_rounds`, a round are
  offered them (a structured round asks its JSON after the calls, so it stays one); the
  reply's usage is every call's, and the tools that ran are kept with the reply
  (`Message.tool_uses`, `Reply.tool_uses`) and counted per tool in its charge
  (`core.domain.tool_usage`), stored with it;
- the model a turn calls is the one its consultation chose among the models allowed to the
  payer: the deployment's (or the bot's), and first those of the payer's active plan, whose
  first model is then the default (`EngineConfig.for_plan`); a plan's model chosen and no
  longer allowed (the plan ended or was refunded) is not called, the default is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from core.domain.attachments import Image
from core.domain.clarifying import ClarifyingRound
from core.domain.consultation import Consultation, Message, Role, Status, TurnRecord
from core.domain.errors import ModelError, ModelErrorKind, TurnAlreadyHandled
from core.domain.json_answer import follows_schema
from core.domain.knowledge import Passage
from core.domain.knowledge_sources import cited_sources
from core.domain.llm_format import QuestionMode, Refusal, StructuredFormats
from core.domain.outcomes import Notice, Reply, replay_of
from core.domain.ports import Completer, CompletionRequest, ConsultationStore, OnText
from core.domain.quotas import QuotaHit
from core.domain.tools import OnToolStart
from core.domain.usage import Accounting, CallKind, Payer
from core.llm.collect import CollectedAnswer, collect_answer
from core.prompting.clarifying_call import AskedRound, Outcome, ask_round
from core.prompting.early_finish import MarkerFilter, strip_marker
from core.prompting.prompts import PromptLibrary
from core.prompting.requests import (
    EngineConfig,
    answer_max_tokens,
    build_completion_request,
    model_of,
)
from core.prompting.rounds import NextRound, after_reply, is_expired, plan_round, ready_round
from core.turns.knowledge_reading import KnowledgeReader
from core.turns.tooling import Tooling, TurnTools

PlanModels = Callable[[str | None], Awaitable[tuple[str, ...]]]
"""The models a person's active plan lists (`core.turns.quota_checks.Quotas.plan_models`)."""

Knowledge = tuple[Passage, ...] | None
"""A turn's knowledge-base passages: None without a knowledge base (or when its search
failed), empty when it had none."""


class Answerer:
    """Asks the model for the open turn's reply and stores it (the caller holds the chat's
    lock, and has committed the user's message already)."""

    def __init__(
        self,
        store: ConsultationStore,
        completer: Completer,
        prompts: PromptLibrary,
        config: EngineConfig,
        clock: Callable[[], float],
        accounting: Accounting,
        formats: StructuredFormats,
        knowledge: KnowledgeReader | None = None,
        tooling: Tooling | None = None,
        plan_models: PlanModels | None = None,
    ) -> None:
        """`formats`: what the process learned of the endpoint's structured replies,
        shared with the client-memory call; `knowledge`: the knowledge base's passages
        (None: the deployment has none); `tooling`: the tools turns are offered (None:
        none); `plan_models`: the models a payer's plan adds (None: no plans)."""
        self._plan_models = plan_models
        self._knowledge = knowledge
        self._tooling = tooling
        self._store = store
        self._accounting = accounting
        self._completer = completer
        self._prompts = prompts
        self._config = config
        self._clock = clock
        self._formats = formats

    async def answer(
        self,
        consultation: Consultation,
        *,
        is_group: bool,
        on_text: OnText | None,
        notices: set[Notice],
        final_requested: bool = False,
        images: Sequence[Image] = (),
        payer: Payer | None = None,
        over_quota: QuotaHit | None = None,
        on_tool: OnToolStart | None = None,
    ) -> Reply:
        """Answer the consultation's open turn, store the reply and advance the round;
        its usage is charged to the chat and `payer` with the reply. `over_quota`: the
        payer reached that limit, so this turn is the consultation's final answer
        (`Notice.QUOTA_FINAL`). `on_tool` hears each tool call as it starts."""
        if over_quota is not None:
            final_requested = True
            notices.add(Notice.QUOTA_FINAL)
        planned = plan_round(consultation, final_requested=final_requested)
        config = await self.config_for(payer)
        knowledge = (
            await self._knowledge.read(consultation) if self._knowledge is not None else None
        )
        tools = (
            self._tooling.turn(self._completer, consultation, knowledge, on_tool)
            if self._tooling is not None
            else TurnTools(self._completer)
        )
        next_round, request, answer, asked = await self._model_answer(
            consultation, planned, is_group, on_text, images, notices, knowledge, tools, config
        )
        text, marked = (asked.text, False) if asked is not None else strip_marker(answer.text)
        if not text.strip():
            raise ModelError(ModelErrorKind.UNAVAILABLE, "the model returned an empty reply")
        early_finish = marked and not next_round.is_final
        if not answer.complete and asked is None:  # a round's questions read are whole
            notices.add(Notice.ANSWER_INCOMPLETE)
        final = next_round.is_final or early_finish
        reply = Message(
            Role.ASSISTANT,
            text,
            self._clock(),
            usage=answer.usage,
            questions=asked,
            ready_for_final=next_round.model_ready,
            knowledge_sources=cited_sources(text, tools.citable(request.knowledge))
            if final
            else (),
            tool_uses=tools.uses,
        )
        planned_from = consultation.current_round
        after_reply(consultation, next_round, reply, early_finish=early_finish)
        complete = consultation.status is Status.COMPLETE
        model = answer.model or request.model
        kind = CallKind.FINAL if final else CallKind.ROUND
        charge = self._accounting.charge(
            answer.usage,
            model=model,
            kind=kind,
            chat=consultation.chat_key,
            payer=payer,
            at=reply.created_at,
            tool_uses=reply.tool_uses,
        )
        # Compare-and-set: if another writer answered this round meanwhile, the store
        # keeps nothing of this turn and raises TurnSuperseded, which the caller gets.
        await self._store.record_reply(
            consultation.id,
            reply,
            expected_round=planned_from,
            current_round=consultation.current_round,
            status=consultation.status,
            last_activity_at=consultation.last_activity_at,
            charge=charge,
        )
        self._accounting.observe(charge)
        return Reply(
            text=text,
            consultation_id=consultation.id,
            round=next_round.round,
            max_rounds=consultation.max_rounds,
            is_final=final,
            is_complete=complete,
            model=model,
            usage=answer.usage,
            notices=frozenset(notices),
            extras=answer.extras,
            json_valid=answer.json_valid,
            schema_valid=None if asked is not None else _schema_valid(answer, request.json_schema),
            questions=asked,
            model_ready=next_round.model_ready,
            follow_ups_left=self._config.followup_limit if complete else 0,
            quota=over_quota,
            knowledge_sources=reply.knowledge_sources,
            tool_uses=reply.tool_uses,
        )

    async def answer_again(
        self,
        found: TurnRecord,
        *,
        is_group: bool,
        on_text: OnText | None,
        final_requested: bool = False,
        images: Sequence[Image] = (),
        payer: Payer | None = None,
        on_tool: OnToolStart | None = None,
    ) -> Reply:
        """A turn whose update was handled before (the caller holds the chat's lock).

        Answered: its stored reply, replayed; the model is not called, nothing is stored.
        Unanswered in the still active (unexpired) consultation, where it is part of the
        open turn: that turn is answered like a retry. Otherwise the consultation moved
        on without answering it (reset, expired, ended): `TurnAlreadyHandled`.
        """
        consultation = found.consultation
        if found.reply is not None:
            return self.replay(found)
        if consultation.status is not Status.ACTIVE or is_expired(
            consultation, now=self._clock(), ttl_seconds=self._config.session_ttl_seconds
        ):
            raise TurnAlreadyHandled(
                f"consultation {consultation.id} moved on without answering this turn"
            )
        return await self.answer(
            consultation,
            is_group=is_group,
            on_text=on_text,
            notices=set(),
            final_requested=final_requested,
            images=images,
            payer=payer,
            on_tool=on_tool,
        )

    async def config_for(self, payer: Payer | None) -> EngineConfig:
        """The engine's config as it applies to `payer`: with their plan's models
        (`EngineConfig.for_plan`), when they have a plan listing some."""
        if self._plan_models is None or payer is None or payer.person is None:
            return self._config
        return self._config.for_plan(await self._plan_models(payer.person))

    def replay(self, found: TurnRecord) -> Reply:
        """An answered turn's stored reply (`replay_of`), with the model its consultation
        asks for and, for a final answer or a follow-up's, the follow-ups it may still
        take now."""
        consultation = found.consultation
        model = model_of(consultation.options.model, self._config)
        reply = replay_of(found, model=model)
        if not reply.is_complete:
            return reply
        left = max(self._config.followup_limit - consultation.follow_ups, 0)
        return dataclasses.replace(reply, follow_ups_left=left)

    async def _model_answer(
        self,
        consultation: Consultation,
        next_round: NextRound,
        is_group: bool,
        on_text: OnText | None,
        images: Sequence[Image],
        notices: set[Notice],
        knowledge: Knowledge,
        tools: TurnTools,
        config: EngineConfig,
    ) -> _Answered:
        """The model's answer, asked again without the images when it refuses them."""
        try:
            return await self._reply(
                consultation, next_round, is_group, on_text, images, knowledge, tools, config
            )
        except ModelError as exc:
            if exc.kind is not ModelErrorKind.IMAGES_REJECTED:
                raise
        # The model reads text only: the same round without the images, told so.
        answered = await self._reply(
            consultation,
            next_round,
            is_group,
            on_text,
            (),
            knowledge,
            tools,
            config,
            images_not_seen=True,
        )
        notices.add(Notice.IMAGES_NOT_SEEN)
        return answered

    async def _reply(
        self,
        consultation: Consultation,
        next_round: NextRound,
        is_group: bool,
        on_text: OnText | None,
        images: Sequence[Image],
        knowledge: Knowledge,
        tools: TurnTools,
        config: EngineConfig,
        *,
        images_not_seen: bool = False,
    ) -> _Answered:
        """The reply to `next_round`: a question round asked as a structured reply while the
        endpoint gives one (`core.prompting.clarifying_call`), else in text; a round whose model
        said it knew enough goes on to the final answer in the same turn."""

        async def in_text(planned: NextRound) -> tuple[CompletionRequest, CollectedAnswer]:
            return await self._collect(
                consultation,
                planned,
                is_group,
                on_text,
                images,
                knowledge,
                tools,
                config,
                images_not_seen,
            )

        if next_round.is_final or self._formats.mode is QuestionMode.OFF:
            return (next_round, *await in_text(next_round), None)
        request = self._request(
            consultation,
            next_round,
            is_group,
            images,
            knowledge,
            tools,
            config,
            images_not_seen,
            True,
        )
        refusals: list[Refusal] = []
        asked = await self._ask_round(tools.completer, request, on_text, refusals)
        if asked is None or asked.answer is None:  # the model is asked in text
            answered = (next_round, *await in_text(next_round), None)
            self._formats.refused(request.model, refusals)
            return answered
        if asked.round is not None:
            if asked.round.questions and not asked.round.ready_for_final:
                return next_round, request, asked.answer, asked.round
            ready = ready_round(next_round)
            final_request, final = await in_text(ready)
            final.usage = asked.answer.usage + final.usage
            return ready, final_request, final, None
        if asked.outcome is Outcome.PROSE:  # the round written in text: the reply
            self._formats.writes_prose(request.model)
            return next_round, request, asked.answer, None
        text_request, answer = await in_text(next_round)  # JSON that is no round: once more
        answer.usage = asked.answer.usage + answer.usage
        return next_round, text_request, answer, None

    async def _ask_round(
        self,
        completer: Completer,
        request: CompletionRequest,
        on_text: OnText | None,
        refusals: list[Refusal],
    ) -> AskedRound | None:
        """The round asked in each form the model may take until one is not refused (the
        refused ones added to `refusals`, and learned once a form answered); None when
        it is to be asked in text (under `on`, MISCONFIGURED instead)."""
        model = request.model
        while (form := self._formats.form(model, [r.form for r in refusals])) is not None:
            asked = await ask_round(
                completer, dataclasses.replace(request, schema_form=form), on_text=on_text
            )
            if asked.outcome is not Outcome.REFUSED:
                self._formats.refused(model, refusals)
                return asked
            refusals.append(Refusal(form, asked.why))
        if self._formats.mode is QuestionMode.ON:
            self._formats.refused(model, refusals)
            raise ModelError(
                ModelErrorKind.MISCONFIGURED,
                f"LLM_STRUCTURED_QUESTIONS=on, but the model endpoint "
                f"{self._formats.why_text(model) or 'refuses response_format'}; "
                "set it to auto or off",
            )
        return None

    def _request(
        self,
        consultation: Consultation,
        next_round: NextRound,
        is_group: bool,
        images: Sequence[Image],
        knowledge: Knowledge,
        tools: TurnTools,
        config: EngineConfig,
        images_not_seen: bool,
        structured: bool = False,
    ) -> CompletionRequest:
        model = model_of(consultation.options.model, config)
        return build_completion_request(
            consultation,
            next_round,
            is_group=is_group,
            prompts=self._prompts,
            config=config,
            images=images,
            images_not_seen=images_not_seen,
            structured=structured,
            knowledge=knowledge,
            tools=tools.offered(model, answering=next_round.is_final),
        )

    async def _collect(
        self,
        consultation: Consultation,
        next_round: NextRound,
        is_group: bool,
        on_text: OnText | None,
        images: Sequence[Image],
        knowledge: Knowledge,
        tools: TurnTools,
        config: EngineConfig,
        images_not_seen: bool = False,
    ) -> tuple[CompletionRequest, CollectedAnswer]:
        """One text answer to `next_round` (continued when cut off), and the request it was."""
        request = self._request(
            consultation, next_round, is_group, images, knowledge, tools, config, images_not_seen
        )
        shown = MarkerFilter(on_text) if on_text is not None else None
        answer = await collect_answer(
            tools.completer,
            request,
            continuation_prompt=self._prompts.continuation,
            max_continuations=self._config.max_continuations,
            on_text=shown.feed if shown is not None else None,
            max_chars=self._config.max_answer_chars,
            # Only a final answer is continued; in a question round, an early final one.
            continue_if=None if next_round.is_final else lambda text: strip_marker(text)[1],
            # Continued, it is the final answer (an early one too): the answer's budget.
            follow_up_max_tokens=answer_max_tokens(consultation, self._config),
        )
        return request, answer


_Answered = tuple[NextRound, CompletionRequest, CollectedAnswer, ClarifyingRound | None]
"""The round as answered (a ready round's is final), its request, the answer collected, and
the round read when the reply asked structured questions."""


def _schema_valid(answer: CollectedAnswer, schema: dict[str, Any] | None) -> bool | None:
    """Whether the final JSON follows the client's schema; None without a schema.

    Text that is no JSON at all does not follow it either."""
    if schema is None:
        return None
    return bool(answer.json_valid) and follows_schema(answer.json_value, schema)
