"""What one turn sends to the model: a pure function of the consultation and its turn.

The round context or final-round instruction goes into the system message; the
history is the bounded window of `core.context`; per-session options (model,
max tokens, search, JSON output) override the deployment's.

Every call has an output budget (`max_tokens`), so a model stuck in a loop on a server
without a limit of its own cannot write for minutes: the final answer gets `max_tokens`
per call (it is continued when cut off), a clarifying round `question_max_tokens`. An API
session's `maxTokens` is its final answer's budget and caps its clarifying rounds too: a
clarifying round gets the smaller of the two.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.answer_schema import schema_object
from core.context import build_model_messages
from core.final_now import user_language
from core.language import language_name
from core.models import Consultation
from core.ports import CompletionRequest
from core.prompts import PromptContext, PromptLibrary, build_system_prompt
from core.rounds import Turn


@dataclass(frozen=True, slots=True)
class EngineConfig:
    model: str
    max_tokens: int | None = 2048  # the final answer's budget per call
    question_max_tokens: int | None = 400  # a clarifying round's budget
    default_max_rounds: int = 3
    max_rounds_limit: int = 10
    session_ttl_seconds: float = 3600
    history_budget_chars: int = 24_000
    max_continuations: int = 3
    default_role: str = "expert"
    max_answer_chars: int = 50_000
    initial_request_budget_chars: int = 6000


def build_completion_request(
    consultation: Consultation,
    turn: Turn,
    *,
    is_group: bool,
    prompts: PromptLibrary,
    config: EngineConfig,
) -> CompletionRequest:
    options = consultation.options
    # JSON output is for the answer; clarifying questions stay plain text.
    json_mode = options.output_format == "json" and turn.is_final
    context = PromptContext(
        round=turn.round,
        max_rounds=turn.max_rounds,
        is_final=turn.is_final,
        final_requested=turn.final_requested,
        initial_request=consultation.initial_request,
        role=consultation.role or config.default_role,
        custom_system_prompt=consultation.system_prompt,
        is_group=is_group,
        json_mode=json_mode,
        json_schema=options.output_schema,
        request_budget_chars=config.initial_request_budget_chars,
        language=language_name(user_language(consultation, prompts))
        if turn.final_requested
        else None,
    )
    system_prompt = build_system_prompt(prompts, context)
    messages = build_model_messages(
        system_prompt,
        consultation.messages,
        is_group=is_group,
        budget_chars=config.history_budget_chars,
        omission_note=prompts.omission_note,
        excerpt_note=prompts.excerpt_note,
    )
    extra_body = {}
    if options.disable_search is not None:
        extra_body["disable_search"] = options.disable_search
    return CompletionRequest(
        messages=messages,
        model=options.model or config.model,
        max_tokens=answer_max_tokens(consultation, config)
        if turn.is_final
        else question_max_tokens(consultation, config),
        json_mode=json_mode,
        extra_body=extra_body,
        json_schema=schema_object(options.output_schema) if json_mode else None,
    )


def answer_max_tokens(consultation: Consultation, config: EngineConfig) -> int | None:
    """The final answer's budget per call: the session's `maxTokens`, else the deployment's."""
    return consultation.options.max_tokens or config.max_tokens


def question_max_tokens(consultation: Consultation, config: EngineConfig) -> int | None:
    """A clarifying round's budget: the deployment's, capped by the session's `maxTokens`."""
    budgets = [b for b in (config.question_max_tokens, consultation.options.max_tokens) if b]
    return min(budgets) if budgets else None
