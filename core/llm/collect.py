"""Collecting one final answer across calls when the model is cut off.

Invariants: the collected text is the first reply followed by each continuation
with the part it repeats removed; nothing the model already
delivered is lost — not even when a continuation fails — and the loop always ends
(on "stop", on a fragment that adds nothing, after `max_continuations`, or at
`max_chars`, where the stream being read is closed and the answer is cut off).

A reply is cut off when the token limit stopped it ("length") or when its stream
just ended without a finish_reason (a server giving up, e.g. on a prompt over its
context); only a final answer (`continue_if`) is continued.

The parts live next to this module, each with its own invariant: `core.llm.overlap` joins a
continuation to the text without the repeated seam (`merge_with_overlap`);
`core.llm.collect_stream` streams one call to `on_text` at O(1) per delta and stops it at
`max_chars` (`CAPPED`) or in a loop (`LOOPED`); `core.domain.json_answer` parses a JSON answer
(`strip_fences`, `parse_json_answer`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.domain.consultation import Usage
from core.domain.errors import ModelError
from core.domain.json_answer import drop_open_fence, parse_json_answer
from core.domain.ports import Completer, Completion, CompletionRequest, OnText
from core.llm.collect_stream import CAPPED, LOOPED, Pieces, Progress, stream_call
from core.llm.overlap import merge_with_overlap

_CUT_OFF = frozenset({"length", None})  # the model would have said more: continue a final one
_INCOMPLETE_REASONS = frozenset({"length", "content_filter", None, CAPPED, LOOPED})


@dataclass
class CollectedAnswer:
    text: str
    complete: bool
    finish_reason: str | None
    continuations: int
    usage: Usage
    model: str
    extras: dict[str, Any] = field(default_factory=dict)
    json_value: Any = None
    json_valid: bool | None = None  # None: not JSON mode
    json_repaired: bool = False
    error: ModelError | None = None  # a continuation that failed after text was received


def _cut(text: str, chars: int) -> str:
    """`text` without its last `chars` characters."""
    return text[: max(len(text) - chars, 0)] if chars else text


async def collect_answer(
    completer: Completer,
    request: CompletionRequest,
    *,
    continuation_prompt: str | Callable[[str], str],
    max_continuations: int,
    on_text: OnText | None = None,
    max_chars: int = 50_000,
    continue_if: Callable[[str], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
    follow_up_max_tokens: int | None = None,
) -> CollectedAnswer:
    """Ask, then keep asking the model to continue while its final answer is cut off.

    `continue_if(first reply)` says whether the reply is a final answer worth
    continuing (None: always). A `ModelError` on the first call propagates (there is
    nothing to keep). One on a continuation ends collection: the text so far is
    returned with `complete=False` and the error in `error`, because losing a long
    answer is worse than delivering it with a note. Past `max_chars` the stream is
    closed and the text cut there, `complete=False`, finish_reason `CAPPED`.

    A text that falls into a loop (`core.llm.repetition`) is stopped there: the stream is
    closed, the repetitions are cut (the first occurrence stays), finish_reason `LOOPED`,
    `complete=False`, and it is not continued.

    `continuation_prompt` is the user message asking to continue, or a function of the text
    so far giving it. Continuations are requested without `json_mode` (a provider
    enforcing a JSON object could not emit the rest of one; the whole text is parsed at
    the end), without tools (a continuation writes the rest, it looks nothing up) and
    with `follow_up_max_tokens` when given. Provider extras (sources) are
    the first call's: its text's [n] markers refer to them; a continuation only adds what
    the first call did not have.
    """
    pieces = Pieces("", on_text, limit=max_chars, clock=clock)
    first, cut = await stream_call(completer, request, pieces, "")
    await pieces.flush()
    text = _cut(first.text[:max_chars], cut)
    if cut and on_text is not None:
        await on_text(text)
    answer = CollectedAnswer(
        text=text,
        complete=False,
        finish_reason=first.finish_reason,
        continuations=0,
        usage=first.usage,
        model=first.model or request.model,
        extras=dict(first.extras),
    )
    if answer.finish_reason in _CUT_OFF and (continue_if is None or continue_if(text)):
        follow_up = dataclasses.replace(request, json_mode=False, tools=())
        if follow_up_max_tokens is not None:
            follow_up = dataclasses.replace(follow_up, max_tokens=follow_up_max_tokens)
        await _continue(
            completer,
            request,
            follow_up,
            answer,
            continuation_prompt=continuation_prompt,
            max_continuations=max_continuations,
            on_text=on_text,
            max_chars=max_chars,
            clock=clock,
        )
    answer.complete = answer.error is None and answer.finish_reason not in _INCOMPLETE_REASONS
    if request.json_mode and not request.schema_required:  # a required one: its caller's
        answer.text, answer.json_value, answer.json_valid, answer.json_repaired = parse_json_answer(
            answer.text
        )
    return answer


async def _continue(
    completer: Completer,
    request: CompletionRequest,
    follow_up: CompletionRequest,
    answer: CollectedAnswer,
    *,
    continuation_prompt: str | Callable[[str], str],
    max_continuations: int,
    on_text: OnText | None,
    max_chars: int,
    clock: Callable[[], float],
) -> None:
    """Continue `answer` in place while it is cut off: each call's text is merged into it
    (or it ends on a fragment adding nothing), a failed call ends it with `error` set."""
    while answer.finish_reason in _CUT_OFF and answer.continuations < max_continuations:
        text = answer.text
        prompt = continuation_prompt(text) if callable(continuation_prompt) else continuation_prompt
        messages = [
            *request.messages,
            {"role": "assistant", "content": text},
            {"role": "user", "content": prompt},
        ]
        progress = Progress(text, on_text, limit=max_chars, clock=clock)
        try:
            part, cut = await stream_call(
                completer, dataclasses.replace(follow_up, messages=messages), progress, text
            )
        except ModelError as exc:
            answer.error = exc
            return
        _count(answer, part)
        fragment = part.text
        if request.json_mode and fragment.lstrip().startswith("```"):
            fragment = drop_open_fence(fragment)  # a restated fence, not content
        merged = _cut(merge_with_overlap(text, fragment), cut)
        if len(merged) > max_chars:
            merged, answer.finish_reason = merged[:max_chars], CAPPED
        if merged == text:
            return  # the model only repeated itself: asking again would loop
        answer.text = merged
        if on_text is not None:
            await on_text(merged)


def _count(answer: CollectedAnswer, part: Completion) -> None:
    """Record one continuation's usage, model and finish_reason, and the extras the first
    call did not have."""
    answer.continuations += 1
    answer.usage = answer.usage + part.usage
    for key, value in part.extras.items():
        if not answer.extras.get(key):
            answer.extras[key] = value
    answer.model, answer.finish_reason = part.model or answer.model, part.finish_reason
