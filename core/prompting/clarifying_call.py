"""A clarifying round asked as a structured reply, and what its reply turns out to be.

Invariants:
- the round is asked in the form `core.domain.llm_format.StructuredFormats` names for the model;
  a refusal of that form (FORMAT_REFUSED) is `AskedRound.refused`, and its caller tries
  the next form, or text;
- a reply that holds no JSON object (a server that ignores `response_format` and writes
  prose) is the round written in text (`AskedRound.prose`): it is the reply, shown as it
  streams and stored as the text path's would be, never asked again;
- only a reply that holds JSON but no round, even once repaired (another shape, or cut
  before any whole question), or that is blank, is asked again in text (`unreadable`);
- the user never sees JSON: while the reply streams,
  `core.prompting.clarifying_stream.RoundStream` shows the preamble and questions read so
  far, or the prose before any JSON;
- the call is bounded: its reply is cut at `MAX_ROUND_CHARS` and never continued.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from core.domain.clarifying import ClarifyingRound, holds_json, parse_reply
from core.domain.errors import ModelError, ModelErrorKind
from core.domain.ports import Completer, CompletionRequest, OnText
from core.llm.collect import CollectedAnswer, collect_answer
from core.prompting.clarifying_stream import RoundStream

MAX_ROUND_CHARS = 12_000
"""A structured round's reply is cut here: 4 questions of 5 options fit many times over."""


class Outcome(enum.Enum):
    ROUND = "round"  # a round read from JSON
    PROSE = "prose"  # no JSON at all: the round written in text
    UNREADABLE = "unreadable"  # JSON but no round, or blank: ask again in text
    REFUSED = "refused"  # the server refused the form (no answer at all)


@dataclass(frozen=True, slots=True)
class AskedRound:
    """A structured call's outcome: its answer (None when refused), the round read from
    it, and `why` when it gave none."""

    outcome: Outcome
    answer: CollectedAnswer | None
    round: ClarifyingRound | None = None
    why: str = ""


async def ask_round(
    completer: Completer,
    request: CompletionRequest,
    *,
    on_text: OnText | None,
) -> AskedRound:
    """Ask `request` (a required `clarifying_round` schema) and read its reply."""
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
        return AskedRound(Outcome.REFUSED, None, why=said)
    found = parse_reply(answer.text, cut_off=answer.finish_reason in ("length", None))
    if found is not None:
        if stream is not None:
            await stream.flush(found)
        return AskedRound(Outcome.ROUND, answer, found)
    if answer.text.strip() and not holds_json(answer.text):
        return AskedRound(Outcome.PROSE, answer, why="answers prose where JSON was asked")
    return AskedRound(Outcome.UNREADABLE, answer, why="gave JSON that is no clarifying round")
