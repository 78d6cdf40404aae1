"""Which form of structured reply a model endpoint takes, learned once per process and
shared by every caller asking it for one (clarifying rounds, the client-memory call).

Invariants:
- `LLM_STRUCTURED_QUESTIONS` has one meaning per value: `off` asks nothing structured;
  `auto` and `on` try the forms of `FORMS` in order, for each model by itself (a
  provider may give one model structured output and not another);
- a form the server refused (FORMAT_REFUSED) is not sent to that model again by this
  process; when none is left, it is asked in text (one WARNING). A server that takes
  the second form (llama-cpp-python: `json_object` with its `schema`, enforced by a
  grammar) is asked in that form from then on, without the refused call;
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


class StructuredFormats:
    """What this process has learned of each model's structured replies (see the module)."""

    def __init__(self, mode: QuestionMode) -> None:
        self.mode = mode
        self._refused: dict[str, set[SchemaForm]] = {}
        self._text: dict[str, str] = {}  # model → why it is asked in text

    def form(self, model: str) -> SchemaForm | None:
        """The form to ask `model` in; None: ask it in text."""
        if self.mode is QuestionMode.OFF or model in self._text:
            return None
        refused = self._refused.get(model, set())
        return next((form for form in FORMS if form not in refused), None)

    def why_text(self, model: str) -> str:
        """Why `model` is asked in text ("" while it is not)."""
        return self._text.get(model, "")

    def refused(self, model: str, form: SchemaForm, why: str) -> None:
        """`model`'s server refused `form`: the next form from now on, or text."""
        refused = self._refused.setdefault(model, set())
        if form in refused:
            return
        refused.add(form)
        following = self.form(model)
        if following is not None:
            log.warning(
                "structured replies: the model endpoint refuses response_format %s (%s); "
                "%s asked as %s from now on",
                form.value,
                why,
                model,
                following.value,
            )
            return
        self._to_text(model, f"refuses response_format ({why})")

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
