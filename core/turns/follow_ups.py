"""Follow-up questions after the final answer: asked about a COMPLETE consultation,
answered directly, stored in it.

Invariants it keeps:
- a follow-up is taken only by a COMPLETE consultation of the asking chat (an id of
  another chat is not found), within the session TTL of its last activity, while fewer
  than `followup_limit` were answered (0 turns them off); otherwise
  `FollowUpUnavailable` says why and nothing is stored;
- the user's question is committed before the model is called (with its turn id); the
  answer is stored by compare-and-set on the count of answered follow-ups
  (`record_follow_up`), so two writers never both answer one (`TurnSuperseded`);
- a follow-up uses no round: `current_round` stays the final round's, so the round a
  stored reply answered (its position among the assistant messages, `locate_turn`) is
  past `current_round` exactly for a follow-up's answer;
- the model is sent the consultation (request, rounds, final answer, earlier follow-ups)
  through the context window's rules, then the follow-up, with the follow-up instruction
  instead of a round's: it answers and asks nothing; with a knowledge base, the passages
  read for the follow-up (`core.turns.knowledge_reading`), and its answer keeps the ones
  it cites; with tools (`core.turns.tooling`), it is offered them, and its answer keeps
  the tools that ran and is charged for every call;
- a follow-up handled again (its turn id found) is answered at most once: replayed when
  answered, answered without storing it again while it is still the open turn and the
  consultation still takes one, else `TurnAlreadyHandled`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from core.domain.attachments import Image
from core.domain.consultation import Consultation, Message, Role, Status, TurnRecord
from core.domain.errors import (
    FollowUpReason,
    FollowUpUnavailable,
    ModelError,
    ModelErrorKind,
    TurnAlreadyHandled,
)
from core.domain.knowledge import Passage
from core.domain.knowledge_sources import KnowledgeSource, cited_sources
from core.domain.outcomes import Notice, Reply
from core.domain.ports import Completer, CompletionRequest, ConsultationStore, OnText
from core.domain.tools import OnToolStart, ToolSpec, ToolUse
from core.domain.usage import Accounting, CallKind, Payer
from core.llm.collect import collect_answer
from core.prompting.context import SEPARATOR
from core.prompting.final_now import user_language
from core.prompting.language import language_name
from core.prompting.prompts import PromptContext, PromptLibrary, build_system_prompt
from core.prompting.requests import (
    EngineConfig,
    answer_max_tokens,
    extra_body_of,
    model_messages,
    model_of,
)
from core.turns.knowledge_reading import KnowledgeReader
from core.turns.tooling import Tooling, TurnTools
from core.turns.user_turns import UserTurns


@dataclass(frozen=True, slots=True)
class FollowUpPart:
    """One follow-up: the user's question, and the answer (None while unanswered) with
    the knowledge-base passages it cites and the tools it used."""

    question: str
    answer: str | None
    sources: tuple[KnowledgeSource, ...] = ()
    tools: tuple[ToolUse, ...] = ()


def final_index(consultation: Consultation) -> int | None:
    """Where the final answer is among the messages (the reply to the last round); None
    unless the consultation is COMPLETE with that reply stored."""
    if consultation.status is not Status.COMPLETE or consultation.current_round < 1:
        return None
    answered = 0
    for index, message in enumerate(consultation.messages):
        if message.role is Role.ASSISTANT:
            answered += 1
            if answered == consultation.current_round:
                return index
    return None


def follow_up_parts(consultation: Consultation) -> list[FollowUpPart]:
    """The follow-ups after the final answer, in order: consecutive user messages are one
    question, the assistant message after them its answer."""
    index = final_index(consultation)
    if index is None:
        return []
    parts: list[FollowUpPart] = []
    question: list[str] = []
    for message in consultation.messages[index + 1 :]:
        if message.role is Role.USER:
            question.append(message.text)
        elif question:
            joined = "\n\n".join(question)
            parts.append(
                FollowUpPart(joined, message.text, message.knowledge_sources, message.tool_uses)
            )
            question = []
    if question:
        parts.append(FollowUpPart("\n\n".join(question), None))
    return parts


def unavailable_reason(
    consultation: Consultation | None, *, now: float, config: EngineConfig
) -> FollowUpReason | None:
    """Why `consultation` takes no follow-up now; None when it takes one."""
    if config.followup_limit <= 0:
        return FollowUpReason.DISABLED
    if consultation is None:
        return FollowUpReason.NOT_FOUND
    if final_index(consultation) is None:
        return FollowUpReason.NOT_COMPLETE
    if now - consultation.last_activity_at > config.session_ttl_seconds:
        return FollowUpReason.EXPIRED
    if consultation.follow_ups >= config.followup_limit:
        return FollowUpReason.LIMIT_REACHED
    return None


def follow_up_request(
    consultation: Consultation,
    *,
    is_group: bool,
    prompts: PromptLibrary,
    config: EngineConfig,
    images: Sequence[Image] = (),
    knowledge: Sequence[Passage] | None = None,
    tools: Sequence[ToolSpec] = (),
) -> CompletionRequest:
    """What the model is sent for the consultation's open follow-up: the system prompt
    with the follow-up instruction, the consultation's client memory and the turn's
    `knowledge` passages (an answer's: cite them), the history fitted by
    `core.prompting.context` (the open follow-up is its latest user message), `images`
    with it; answered in text with the final answer's budget, `tools` offered (and their
    results called data)."""
    context = PromptContext(
        round=consultation.current_round,
        max_rounds=consultation.max_rounds,
        is_final=False,
        final_requested=False,
        initial_request=consultation.initial_request,
        role=consultation.role or config.default_role,
        custom_system_prompt=consultation.system_prompt,
        is_group=is_group,
        request_budget_chars=config.initial_request_budget_chars,
        language=language_name(user_language(consultation, prompts)),
        follow_up=True,
    )
    system_prompt = build_system_prompt(prompts, context)
    if tools:
        system_prompt += SEPARATOR + prompts.tools_data
    messages, kept = model_messages(
        system_prompt,
        consultation,
        is_group=is_group,
        prompts=prompts,
        config=config,
        images=images,
        knowledge=knowledge,
        answering=True,
    )
    return CompletionRequest(
        messages=messages,
        model=model_of(consultation.options.model, config),
        max_tokens=answer_max_tokens(consultation, config),
        extra_body=extra_body_of(consultation.options),
        knowledge=kept,
        tools=tuple(tools),
    )


class FollowUps:
    """Takes a follow-up into its consultation and answers it (the caller holds the
    chat's lock as a turn a reset may stop)."""

    def __init__(
        self,
        store: ConsultationStore,
        completer: Completer,
        prompts: PromptLibrary,
        config: EngineConfig,
        clock: Callable[[], float],
        user_turns: UserTurns,
        accounting: Accounting,
        knowledge: KnowledgeReader | None = None,
        tooling: Tooling | None = None,
        config_for: Callable[[Payer | None], Awaitable[EngineConfig]] | None = None,
    ) -> None:
        """`knowledge`: the knowledge base's passages (None: the deployment has none);
        `tooling`: the tools offered (None: none); `config_for`: the config as it applies
        to a payer, with their plan's models (`Answerer.config_for`; None: `config`)."""
        self._config_for = config_for
        self._knowledge = knowledge
        self._tooling = tooling
        self._store = store
        self._accounting = accounting
        self._completer = completer
        self._prompts = prompts
        self._config = config
        self._clock = clock
        self._user_turns = user_turns

    async def target(self, chat_key: str, consultation_id: str | None) -> Consultation:
        """The consultation a follow-up goes to: the chat's own `consultation_id` (the
        hyphens of its id may be left out), else the chat's newest; raises
        `FollowUpUnavailable` when it takes none now."""
        if self._config.followup_limit <= 0:
            raise FollowUpUnavailable(FollowUpReason.DISABLED, "follow-ups are off")
        if consultation_id is None:
            consultation = await self._store.load_latest(chat_key)
        else:
            consultation = await self._store.get(_hyphenated(consultation_id))
            if consultation is not None and consultation.chat_key != chat_key:
                consultation = None  # another chat's: as if there were none
        reason = unavailable_reason(consultation, now=self._clock(), config=self._config)
        if reason is not None:
            raise FollowUpUnavailable(reason, f"consultation {consultation_id or 'latest'}")
        assert consultation is not None
        return consultation

    async def ask(
        self,
        consultation: Consultation,
        text: str,
        *,
        author: str | None,
        is_group: bool,
        on_text: OnText | None,
        turn_id: str | None,
        images: Sequence[Image] = (),
        payer: Payer | None = None,
        on_tool: OnToolStart | None = None,
    ) -> Reply:
        """Store the follow-up (committed before the model is called), answer it and
        store the answer."""
        now = self._clock()
        await self._user_turns.add_message(consultation, text, author, now, turn_id)
        return await self.answer(
            consultation,
            is_group=is_group,
            on_text=on_text,
            images=images,
            payer=payer,
            on_tool=on_tool,
        )

    async def again(
        self,
        found: TurnRecord,
        *,
        is_group: bool,
        on_text: OnText | None,
        replay: Callable[[TurnRecord], Reply],
        images: Sequence[Image] = (),
        payer: Payer | None = None,
        on_tool: OnToolStart | None = None,
    ) -> Reply:
        """A follow-up whose update was handled before: its answer replayed when stored;
        answered when it is still the open follow-up of a consultation that takes one;
        else `TurnAlreadyHandled`."""
        consultation = found.consultation
        if found.reply is not None:
            return replay(found)
        reason = unavailable_reason(consultation, now=self._clock(), config=self._config)
        if reason is not None or consultation.messages[-1].role is not Role.USER:
            raise TurnAlreadyHandled(
                f"consultation {consultation.id} moved on without answering this follow-up"
            )
        return await self.answer(
            consultation,
            is_group=is_group,
            on_text=on_text,
            images=images,
            payer=payer,
            on_tool=on_tool,
        )

    async def answer(
        self,
        consultation: Consultation,
        *,
        is_group: bool,
        on_text: OnText | None,
        images: Sequence[Image] = (),
        payer: Payer | None = None,
        on_tool: OnToolStart | None = None,
    ) -> Reply:
        """Answer the open follow-up and record it (compare-and-set on the count), its
        usage charged with it; `on_tool` hears each tool call as it starts."""
        knowledge = (
            await self._knowledge.read(consultation) if self._knowledge is not None else None
        )
        tools = (
            self._tooling.turn(self._completer, consultation, knowledge, on_tool)
            if self._tooling is not None
            else TurnTools(self._completer)
        )
        config = self._config if self._config_for is None else await self._config_for(payer)
        model = model_of(consultation.options.model, config)
        request = follow_up_request(
            consultation,
            is_group=is_group,
            prompts=self._prompts,
            config=config,
            images=images,
            knowledge=knowledge,
            tools=tools.offered(model, answering=True),
        )
        answer = await collect_answer(
            tools.completer,
            request,
            continuation_prompt=self._prompts.continuation,
            max_continuations=self._config.max_continuations,
            on_text=on_text,
            max_chars=self._config.max_answer_chars,
            follow_up_max_tokens=request.max_tokens,
        )
        if not answer.text.strip():
            raise ModelError(ModelErrorKind.UNAVAILABLE, "the model returned an empty reply")
        now = self._clock()
        reply = Message(
            Role.ASSISTANT,
            answer.text,
            now,
            usage=answer.usage,
            knowledge_sources=cited_sources(answer.text, tools.citable(request.knowledge)),
            tool_uses=tools.uses,
        )
        expected = consultation.follow_ups
        model = answer.model or request.model
        charge = self._accounting.charge(
            answer.usage,
            model=model,
            kind=CallKind.FOLLOW_UP,
            chat=consultation.chat_key,
            payer=payer,
            at=now,
            tool_uses=reply.tool_uses,
        )
        await self._store.record_follow_up(
            consultation.id,
            reply,
            expected_follow_ups=expected,
            last_activity_at=now,
            charge=charge,
        )
        self._accounting.observe(charge)
        consultation.messages.append(reply)
        consultation.follow_ups = expected + 1
        consultation.last_activity_at = now
        notices = frozenset() if answer.complete else frozenset({Notice.ANSWER_INCOMPLETE})
        return Reply(
            text=answer.text,
            consultation_id=consultation.id,
            round=consultation.current_round,
            max_rounds=max(consultation.max_rounds, consultation.current_round),
            is_final=True,
            is_complete=True,
            model=model,
            usage=answer.usage,
            notices=notices,
            extras=answer.extras,
            follow_up=consultation.follow_ups,
            follow_ups_left=max(self._config.followup_limit - consultation.follow_ups, 0),
            knowledge_sources=reply.knowledge_sources,
            tool_uses=reply.tool_uses,
        )


def is_follow_up(found: TurnRecord) -> bool:
    """The turn found is a follow-up: a user message after its consultation's final answer."""
    index = final_index(found.consultation)
    if index is None:
        return False
    return any(m is found.message for m in found.consultation.messages[index + 1 :])


def _hyphenated(consultation_id: str) -> str:
    """A consultation id as stored: 32 hex digits (a button's) get the UUID's hyphens."""
    if len(consultation_id) == 32 and "-" not in consultation_id:
        with contextlib.suppress(ValueError):
            return str(uuid.UUID(hex=consultation_id))
    return consultation_id
