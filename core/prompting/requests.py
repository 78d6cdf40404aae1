"""What one round sends to the model: a pure function of the consultation and its `NextRound`.

The round context or final-round instruction goes into the system message; the
history is the bounded window of `core.prompting.context`; per-session options (model,
max tokens, search, JSON output) override the deployment's.

Every call has an output budget (`max_tokens`), so a model stuck in a loop on a server
without a limit of its own cannot write for minutes: the final answer gets `max_tokens`
per call (it is continued when cut off), a clarifying round `question_max_tokens`. An API
session's `maxTokens` is its final answer's budget and caps its clarifying rounds too: a
clarifying round gets the smaller of the two.

Knowledge-base passages (`knowledge`, read once per turn by `core.turns.knowledge_reading`)
go into the system message after the round's instructions (`core.prompting.excerpts`):
a round is told to ask nothing they answer, an answer to rely on them and cite them; the
context window fits them in (`core.prompting.context`), and the request names the
passages it kept (`CompletionRequest.knowledge`), the ones its reply can cite. Without
passages (`None`: no knowledge base, or its search failed) the request is what it is
without a knowledge base; an answer the knowledge base had nothing for (`()`) is told so.

Images reach the model only in the request of the round they came with: its last user
message becomes OpenAI content parts (its text, then one `image_url` part per image).
The store keeps the text alone, with its [photo] placeholder, so later rounds, retries
and replays send text. A round whose images the model refused is asked again without
them, with a note in the system message that the user sent a photo it cannot see.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.domain.attachments import Image
from core.domain.clarifying import ROUND_SCHEMA, SCHEMA_NAME
from core.domain.consultation import Consultation, ModelOptions
from core.domain.facts import within_budget
from core.domain.json_answer import schema_object
from core.domain.knowledge import Passage
from core.domain.plans import models_with_plan
from core.domain.ports import CompletionRequest
from core.domain.tools import ToolSpec
from core.prompting.context import SEPARATOR, ContextWindow, build_model_messages
from core.prompting.excerpts import knowledge_reference
from core.prompting.final_now import user_language
from core.prompting.language import language_name
from core.prompting.prompts import PromptContext, PromptLibrary, build_system_prompt
from core.prompting.rounds import NextRound


@dataclass(frozen=True, slots=True)
class EngineConfig:
    model: str
    # The models a chat or a session may choose (LLM_MODELS, `model` among them).
    models: tuple[str, ...] = ()
    max_tokens: int | None = 2048  # the final answer's budget per call
    question_max_tokens: int | None = 400  # a clarifying round's budget
    default_max_rounds: int = 3
    max_rounds_limit: int = 10
    session_ttl_seconds: float = 3600
    history_budget_chars: int = 24_000
    max_continuations: int = 3
    default_role: str = "expert"
    # A system prompt of its own in place of the default role's persona (a bot's
    # `instruction`); a chat that picks a /role or has its own prompt keeps that.
    default_instruction: str | None = None
    max_answer_chars: int = 50_000
    initial_request_budget_chars: int = 6000
    # The original request's documents, on top of the history budget (`core.prompting.context`).
    documents_budget_chars: int = 30_000
    structured_questions: str = "auto"  # `core.domain.llm_format.QuestionMode`
    final_brief: bool = True  # a final text answer opens with what it took into account
    memory_enabled: bool = True  # client memory (`core.domain.facts`)
    memory_max_tokens: int = 300  # the remembered facts' share of the system prompt
    followup_limit: int = 5  # follow-ups a complete consultation takes (0: none)
    knowledge_top_k: int = 6  # knowledge-base passages a turn reads
    knowledge_max_chars: int = 6000  # their text in all (`core.prompting.excerpts`)
    # Tools (`core.llm.tool_loop`), when the engine is given a toolbox:
    tools_in_rounds: bool = True  # clarifying rounds are offered them too, not only answers
    tools_max_calls: int = 6  # tool calls run per turn, in all
    tool_parallel: int = 3  # tool calls of one turn running at once
    # The knowledge base's search offered as a tool (`core.turns.knowledge_tool`) when it
    # has documents; off unless the deployment turns it on (KNOWLEDGE_TOOL).
    knowledge_tool: bool = False

    @property
    def allowed_models(self) -> tuple[str, ...]:
        """The models a chat or a session may choose: `models`, else `model` alone."""
        return self.models or (self.model,)

    def for_plan(self, plan_models: tuple[str, ...]) -> EngineConfig:
        """This config for a person whose active plan lists `plan_models`: the plan's first
        model is the default, and the plan's models come first among the choices
        (`core.domain.plans.models_with_plan`); no models: this config."""
        if not plan_models:
            return self
        model, models = models_with_plan(self.model, self.allowed_models, plan_models)
        return dataclasses.replace(self, model=model, models=models)


def model_of(chosen: str | None, config: EngineConfig) -> str:
    """The model a consultation's next call uses (or a chat's next consultation): the one
    chosen while the allow-list still names it, else the deployment's (a model the operator
    removed is never called)."""
    return chosen if chosen is not None and chosen in config.allowed_models else config.model


def model_messages(
    system_prompt: str,
    consultation: Consultation,
    *,
    is_group: bool,
    prompts: PromptLibrary,
    config: EngineConfig,
    images: Sequence[Image] = (),
    knowledge: Sequence[Passage] | None = None,
    answering: bool = False,
) -> tuple[list[dict[str, Any]], tuple[Passage, ...]]:
    """The messages the model reads: `system_prompt` with the client memory the
    consultation started with (within its budget) and the `knowledge` passages (with an
    answer's instruction when `answering`, else a round's), then the history fitted by
    `core.prompting.context`, `images` going with its last user message; and the
    passages the window kept."""
    if config.memory_enabled and consultation.memory_facts:
        facts = within_budget(consultation.memory_facts, config.memory_max_tokens)
        if facts:
            system_prompt += SEPARATOR + prompts.client_memory(facts)
    if answering and knowledge is not None and not knowledge:
        system_prompt += SEPARATOR + prompts.knowledge_none
    passages = tuple(knowledge or ())
    window: ContextWindow = build_model_messages(
        system_prompt,
        consultation.messages,
        is_group=is_group,
        budget_chars=config.history_budget_chars,
        omission_note=prompts.omission_note,
        excerpt_note=prompts.excerpt_note,
        documents_budget_chars=config.documents_budget_chars,
        reference=knowledge_reference(prompts, passages, answering=answering),
        tool_uses_note=prompts.tool_uses,
    )
    messages: list[dict[str, Any]] = list(window.messages)
    if images and messages[-1]["role"] == "user":
        messages[-1] = with_images(messages[-1], images)
    return messages, passages[: window.references]


def extra_body_of(options: ModelOptions) -> dict[str, Any]:
    """Provider parameters beyond OpenAI's that a session set (Perplexity's search)."""
    extra_body: dict[str, Any] = {}
    if options.disable_search is not None:
        extra_body["disable_search"] = options.disable_search
    return extra_body


def build_completion_request(
    consultation: Consultation,
    next_round: NextRound,
    *,
    is_group: bool,
    prompts: PromptLibrary,
    config: EngineConfig,
    images: Sequence[Image] = (),
    images_not_seen: bool = False,
    structured: bool = False,
    knowledge: Sequence[Passage] | None = None,
    tools: Sequence[ToolSpec] = (),
) -> CompletionRequest:
    """The request for `next_round`; `images` go with its last user message, and
    `images_not_seen` tells the model that the user sent images it could not take.
    `structured` asks a question round for a `core.domain.clarifying` round (JSON, its schema
    required); a final answer is always asked in text (or the session's JSON). `knowledge`:
    the turn's knowledge-base passages, best first (see the module). `tools` are offered
    with it, and its system message then says that their results are data."""
    options = consultation.options
    structured = structured and not next_round.is_final
    # A session's JSON output is for the answer, never for its questions.
    json_mode = options.output_format == "json" and next_round.is_final
    context = PromptContext(
        round=next_round.round,
        max_rounds=next_round.max_rounds,
        is_final=next_round.is_final,
        final_requested=next_round.final_requested,
        initial_request=consultation.initial_request,
        role=consultation.role or config.default_role,
        custom_system_prompt=consultation.system_prompt,
        is_group=is_group,
        json_mode=json_mode,
        json_schema=options.output_schema,
        request_budget_chars=config.initial_request_budget_chars,
        language=language_name(user_language(consultation, prompts))
        if next_round.final_requested
        else None,
        structured=structured,
        model_ready=next_round.model_ready,
        brief=config.final_brief,
    )
    system_prompt = build_system_prompt(prompts, context)
    if images_not_seen:
        system_prompt += SEPARATOR + prompts.images_not_seen
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
        answering=next_round.is_final,
    )
    extra_body = extra_body_of(options)
    if structured:
        return CompletionRequest(
            messages=messages,
            model=model_of(options.model, config),
            max_tokens=structured_max_tokens(consultation, config),
            json_mode=True,
            extra_body=extra_body,
            json_schema=ROUND_SCHEMA,
            schema_name=SCHEMA_NAME,
            schema_required=True,
            knowledge=kept,
            tools=tuple(tools),
        )
    return CompletionRequest(
        messages=messages,
        model=model_of(options.model, config),
        max_tokens=answer_max_tokens(consultation, config)
        if next_round.is_final
        else question_max_tokens(consultation, config),
        json_mode=json_mode,
        extra_body=extra_body,
        json_schema=schema_object(options.output_schema) if json_mode else None,
        knowledge=kept,
        tools=tuple(tools),
    )


def with_images(message: dict[str, Any], images: Sequence[Image]) -> dict[str, Any]:
    """`message` with its text followed by `images`, as OpenAI content parts."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": message["content"]}]
    parts += ({"type": "image_url", "image_url": {"url": image.data_url()}} for image in images)
    return {**message, "content": parts}


def answer_max_tokens(consultation: Consultation, config: EngineConfig) -> int | None:
    """The final answer's budget per call: the session's `maxTokens`, else the deployment's."""
    return consultation.options.max_tokens or config.max_tokens


def structured_max_tokens(consultation: Consultation, config: EngineConfig) -> int | None:
    """A structured round's budget: twice a text round's, for the JSON around the same
    words (never more than the session's `maxTokens`)."""
    budget = config.question_max_tokens
    budgets = [b for b in (budget and 2 * budget, consultation.options.max_tokens) if b]
    return min(budgets) if budgets else None


def question_max_tokens(consultation: Consultation, config: EngineConfig) -> int | None:
    """A clarifying round's budget: the deployment's, capped by the session's `maxTokens`."""
    budgets = [b for b in (config.question_max_tokens, consultation.options.max_tokens) if b]
    return min(budgets) if budgets else None
