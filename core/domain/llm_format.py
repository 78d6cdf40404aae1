"""Which form of structured reply a model endpoint takes, learned once per process and
shared by every caller asking it for one (clarifying rounds, the client-memory call).

Invariants:
- `LLM_STRUCTURED_QUESTIONS` has one meaning per value: `off` asks nothing structured;
  `auto` and `on` try the forms of `FORMS` in order, for each model by itself (a
  provider may give one model structured output and not another);
- a form the server refused (FORMAT_REFUSED) is not sent to that model again by this
  process, once a later call (the next form, or text) was answered: a refusal followed
  by failures may be an outage (a hang-up is one way to refuse), and is not kept. When
  no form is left, the model is asked in text (one WARNING). A server that takes the
  second form (llama-cpp-python: `json_object` with its `schema`, enforced by a grammar)
  is asked in that form from then on, without the refused call;
- under `auto`, a model that answered prose where JSON was asked (a server that ignores
  `response_format`) is asked in text from then on (one WARNING); under `on` it is asked
  for JSON still, and its prose is taken as it comes;
- the memory is the process's: a new process learns again, at the cost of one refused
  call per refused form (prose costs no call: it is taken as the reply).
Pure: no I/O.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)


class QuestionMode(enum.StrEnum):
    AUTO = "auto"
    ON = "on"
    OFF = "off"


class SchemaForm(enum.StrEnum):
    """How a required schema is sent (`CompletionRequest.schema_form`)."""

    JSON_SCHEMA = "json_schema"
    """`{"type": "json_schema", "json_schema": {…, "strict": true}}`: OpenAI, llama.cpp's
    server, vLLM and most providers."""
    JSON_OBJECT = "json_object"
    """`{"type": "json_object", "schema": …}`: llama-cpp-python's server, which refuses
    json_schema."""


FORMS = (SchemaForm.JSON_SCHEMA, SchemaForm.JSON_OBJECT)
"""The forms tried, in order."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A form a call was refused (FORMAT_REFUSED), and the server's words."""

    form: SchemaForm
    why: str


class StructuredFormats:
    """What this process has learned of each model's structured replies (see the module).
    Its keys are models the operator's allow-list names (`core.prompting.requests.model_of`), so it
    stays as small as that list."""

    def __init__(self, mode: QuestionMode) -> None:
        self.mode = mode
        self._refused: dict[str, set[SchemaForm]] = {}
        self._text: dict[str, str] = {}  # model → why it is asked in text

    def form(self, model: str, tried: Collection[SchemaForm] = ()) -> SchemaForm | None:
        """The form to ask `model` in, past those a call refused just now (`tried`);
        None: ask it in text."""
        if self.mode is QuestionMode.OFF or model in self._text:
            return None
        refused = self._refused.get(model, set())
        return next((f for f in FORMS if f not in refused and f not in tried), None)

    def why_text(self, model: str) -> str:
        """Why `model` is asked in text ("" while it is not)."""
        return self._text.get(model, "")

    def refused(self, model: str, refusals: Sequence[Refusal]) -> None:
        """`model`'s server refused these forms, and then answered a later call (so they
        were refusals, not an outage): the next form from now on, or text."""
        known = self._refused.setdefault(model, set())
        new = [r for r in refusals if r.form not in known]
        if not new:
            return
        known.update(r.form for r in new)
        why = "; ".join(f"{r.form.value}: {r.why}" for r in new)
        following = self.form(model)
        if following is None:
            self._to_text(model, f"refuses response_format ({why})")
            return
        log.warning(
            "structured replies: the model endpoint refuses response_format (%s); %s is "
            "asked with response_format %s from now on",
            why,
            model,
            following.value,
        )

    def writes_prose(self, model: str) -> None:
        """`model` answered prose where JSON was asked: text from now on, under `auto`."""
        if self.mode is QuestionMode.AUTO:
            self._to_text(model, "answers prose where JSON was asked")

    def _to_text(self, model: str, why: str) -> None:
        if model in self._text:
            return
        self._text[model] = why
        log.warning(
            "structured replies: the model endpoint %s; %s is asked in text from now on "
            "(clarifying rounds and client memory; LLM_STRUCTURED_QUESTIONS=%s)",
            why,
            model,
            self.mode.value,
        )
