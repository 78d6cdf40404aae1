"""A clarifying round asked as a structured reply, and what happens when the endpoint
cannot give one.

Invariants:
- `LLM_STRUCTURED_QUESTIONS` has one meaning per value: `off` asks every round in text;
  `on` asks every clarifying round for a `clarifying_round` JSON reply, and a server
  refusing that is a configuration error (MISCONFIGURED); `auto` asks for it until the
  endpoint shows it cannot give one — a refusal naming `response_format`, or prose
  where JSON was asked — then asks that round again in text, and, once that text round
  succeeded, asks every later round in text for the life of the process (one WARNING);
- a reply that is JSON but no round even once repaired is asked again in text once,
  without marking the endpoint (it gave JSON, just not a usable one);
- the user never sees JSON: while the reply streams, `core.clarifying.RoundStream` shows
  the preamble and questions read so far;
- the call is bounded: its reply is cut at `MAX_ROUND_CHARS` and never continued.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from core.clarifying import ClarifyingRound, RoundStream, looks_like_json, parse_reply
from core.collect import CollectedAnswer, collect_answer
from core.errors import ModelError, ModelErrorKind
from core.ports import Completer, CompletionRequest, OnText

log = logging.getLogger(__name__)

MAX_ROUND_CHARS = 12_000
"""A structured round's reply is cut here: 4 questions of 5 options fit many times over."""


class QuestionMode(enum.StrEnum):
    AUTO = "auto"
    ON = "on"
    OFF = "off"


class QuestionFormat:
    """Whether this process's endpoint is asked for structured rounds (see the module)."""

    def __init__(self, mode: QuestionMode) -> None:
        self.mode = mode
        self._text_only = mode is QuestionMode.OFF

    @property
    def structured(self) -> bool:
        return not self._text_only

    def check(self, asked: AskedRound) -> None:
        """Under `on`, an endpoint refusing the schema is a configuration error."""
        if self.mode is QuestionMode.ON and asked.refused:
            raise ModelError(
                ModelErrorKind.MISCONFIGURED,
                f"LLM_STRUCTURED_QUESTIONS=on, but the model endpoint {asked.why}; "
                "set it to auto or off",
            )

    def remember(self, asked: AskedRound) -> None:
        """After the text round asked instead succeeded: under `auto`, an endpoint that
        cannot give structured rounds is asked in text from now on (logged once)."""
        if self.mode is QuestionMode.AUTO and asked.endpoint_cannot and not self._text_only:
            self._text_only = True
            log.warning(
                "structured questions: the model endpoint %s; clarifying rounds are asked "
                "in text from now on (LLM_STRUCTURED_QUESTIONS=auto)",
                asked.why,
            )


@dataclass(frozen=True, slots=True)
class AskedRound:
    """A structured call's outcome: the round read from it, or None when it must be asked
    again in text (`why` the endpoint cannot, `endpoint_cannot` whether that is the
    endpoint's habit rather than this reply's)."""

    answer: CollectedAnswer | None
    round: ClarifyingRound | None
    why: str = ""
    endpoint_cannot: bool = False
    refused: bool = False  # the server refused the schema itself (no answer at all)


async def ask_round(
    completer: Completer,
    request: CompletionRequest,
    *,
    on_text: OnText | None,
) -> AskedRound:
    """Ask `request` (a required `clarifying_round` schema) and read its round."""
    stream = RoundStream(on_text) if on_text is not None else None
    try:
        answer = await collect_answer(
            completer,
            request,
            continuation_prompt="",  # never used: a round is not continued
            max_continuations=0,
            on_text=stream.feed if stream is not None else None,
            max_chars=MAX_ROUND_CHARS,
            continue_if=lambda _: False,
        )
    except ModelError as exc:
        if exc.kind is not ModelErrorKind.FORMAT_REFUSED:
            raise
        said = " ".join(exc.detail.split())[:200]  # one line, whatever the server wrote
        return AskedRound(None, None, f"refuses response_format ({said})", True, True)
    found = parse_reply(answer.text, cut_off=answer.finish_reason in ("length", None))
    if found is not None:
        if stream is not None:
            await stream.flush(found)
        return AskedRound(answer, found)
    if not looks_like_json(answer.text):
        return AskedRound(answer, None, "answers prose where JSON was asked", True)
    return AskedRound(answer, None, "gave JSON that is no clarifying round")
