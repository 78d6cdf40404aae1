"""Noting a finished consultation's durable facts: one model call, asked as a structured
reply while the endpoint gives one.

Invariants:
- with `LLM_STRUCTURED_QUESTIONS` `auto` or `on` the call asks for a required
  `client_facts` schema (`{"facts": [string]}`, strict) in the form the process's
  `core.domain.llm_format.StructuredFormats` names for the model, which the clarifying rounds
  share: a form refused (FORMAT_REFUSED) is never sent again by either, and a model known
  to write prose or to refuse every form is asked in text (one fact a line) at once. A
  reply that holds no facts (prose, or JSON of another shape) makes the same call in text.
  Memory is a nicety: unlike a clarifying round, `on` never makes a refusal an error
  here. With `off` every call is in text;
- only what the user said is sent as theirs: in a group, the messages of the member who
  started the consultation; the assistant's questions go with them for context, its final
  answer never does (facts come from the user, not from the advice);
- the call is bounded: the conversation sent is cut to `MAX_CONVERSATION_CHARS`, the
  reply at `MAX_REPLY_CHARS` and `MAX_REPLY_TOKENS`, never continued, and at most
  `MAX_FACTS` facts are read from it.
"""

from __future__ import annotations

from core.domain.clarifying import holds_json
from core.domain.consultation import Consultation, Role, Usage
from core.domain.errors import ModelError, ModelErrorKind
from core.domain.facts import FACTS_SCHEMA, SCHEMA_NAME, facts_from_lines, parse_facts
from core.domain.llm_format import Refusal, SchemaForm, StructuredFormats
from core.domain.ports import Completer, CompletionRequest
from core.llm.collect import collect_answer
from core.prompting.prompts import PromptLibrary

MAX_CONVERSATION_CHARS = 12_000
MAX_REPLY_CHARS = 8_000
MAX_REPLY_TOKENS = 600
MAX_QUESTION_CHARS = 600
"""The assistant's questions are context only: each is cut here."""


class FactsCall:
    """Asks the model for a consultation's facts, in the structured form the process's
    `StructuredFormats` names for the model (shared with the clarifying rounds)."""

    def __init__(
        self, completer: Completer, prompts: PromptLibrary, formats: StructuredFormats
    ) -> None:
        self._completer = completer
        self._prompts = prompts
        self._formats = formats

    async def extract(
        self, consultation: Consultation, known: list[str], model: str
    ) -> tuple[list[str], Usage]:
        """The durable facts the consultation's user stated, not among `known`, and the
        usage of the calls that found them (none made: zero)."""
        conversation = conversation_text(consultation)
        if not conversation:
            return [], Usage()
        spent = Usage()
        refusals: list[Refusal] = []
        while (form := self._formats.form(model, [r.form for r in refusals])) is not None:
            try:
                found, spent = await self._ask(conversation, known, model, form)
            except ModelError as exc:
                if exc.kind is not ModelErrorKind.FORMAT_REFUSED:
                    raise
                refusals.append(Refusal(form, " ".join(exc.detail.split())[:200]))
                continue
            self._formats.refused(model, refusals)
            refusals = []
            if found is not None:
                return found, spent
            break
        found, more = await self._ask(conversation, known, model, None)
        self._formats.refused(model, refusals)
        return found or [], spent + more

    async def _ask(
        self, conversation: str, known: list[str], model: str, form: SchemaForm | None
    ) -> tuple[list[str] | None, Usage]:
        """One call: structured in `form`, or in text (one fact a line) without one."""
        structured = form is not None
        request = CompletionRequest(
            messages=[
                {
                    "role": "system",
                    "content": self._prompts.extract_facts(known, structured=structured),
                },
                {"role": "user", "content": conversation},
            ],
            model=model,
            max_tokens=MAX_REPLY_TOKENS,
            json_mode=structured,
            json_schema=FACTS_SCHEMA if structured else None,
            schema_name=SCHEMA_NAME,
            schema_required=structured,
            schema_form=form or SchemaForm.JSON_SCHEMA,
        )
        answer = await collect_answer(
            self._completer,
            request,
            continuation_prompt="",  # never used: facts are not continued
            max_continuations=0,
            max_chars=MAX_REPLY_CHARS,
            continue_if=lambda _: False,
        )
        if not structured:
            return facts_from_lines(answer.text), answer.usage
        found = parse_facts(answer.text)
        if found is None and not holds_json(answer.text):
            self._formats.writes_prose(model)
        return found, answer.usage


def conversation_text(consultation: Consultation) -> str:
    """The consultation as the extraction reads it (see the module), within
    `MAX_CONVERSATION_CHARS`: each message cut to an equal share when it is longer."""
    starter = consultation.messages[0].author if consultation.messages else None
    last_reply = max(
        (i for i, m in enumerate(consultation.messages) if m.role is Role.ASSISTANT), default=-1
    )
    parts: list[tuple[str, str]] = []
    for index, message in enumerate(consultation.messages):
        if message.role is Role.ASSISTANT:
            if index != last_reply:
                parts.append(("Assistant", message.text[:MAX_QUESTION_CHARS]))
        elif message.author == starter:
            parts.append(("User", message.text))
    if not any(label == "User" for label, _ in parts):
        return ""
    share = max(200, MAX_CONVERSATION_CHARS // len(parts))
    text = "\n\n".join(f"{label}: {body[:share]}" for label, body in parts)
    return text[:MAX_CONVERSATION_CHARS]
