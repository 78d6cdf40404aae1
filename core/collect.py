"""Collecting one final answer across calls when the model is cut off by its token limit.

Invariant: the collected text is the first reply followed by each continuation
with the part it repeats removed (SPEC §5, seed 004); nothing the model already
delivered is lost — not even when a continuation fails — and the loop always ends
(on "stop", on a fragment that adds nothing, or after `max_continuations`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from json_repair import repair_json

from core.errors import ModelError
from core.models import Usage
from core.ports import Completer, CompletionRequest

OnText = Callable[[str], Awaitable[None]]

MIN_OVERLAP = 4
"""Shorter seams are taken as coincidence: a model continuing exactly where it
stopped often starts with a letter or two the text happens to end with."""

OVERLAP_WINDOW = 4000
"""Only the last characters are searched: a model repeats its last lines, not pages."""

_INCOMPLETE_REASONS = frozenset({"length", "content_filter"})
_OPEN_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*[ \t]*\n?")
_CLOSE_FENCE = re.compile(r"\n?```\s*$")


def _overlap(tail: str, fragment: str, min_overlap: int) -> int:
    """Length of the longest suffix of `tail` that is a prefix of `fragment` (0 if < min)."""
    if min(len(tail), len(fragment)) < min_overlap:
        return 0
    probe = fragment[:min_overlap]
    start = tail.find(probe)
    while start != -1:  # the first hit is the longest overlap; str methods keep it fast
        if fragment.startswith(tail[start:]):
            return len(tail) - start
        start = tail.find(probe, start + 1)
    return 0


def merge_with_overlap(
    accumulated: str,
    fragment: str,
    *,
    min_overlap: int = MIN_OVERLAP,
    window: int = OVERLAP_WINDOW,
) -> str:
    """Append `fragment` to `accumulated` without repeating what they share at the seam.

    Rules, in order:
    1. A fragment whose trimmed text (at least `min_overlap` characters) occurs in the
       last `window` characters adds nothing: the model repeated itself.
    2. The longest suffix of `accumulated` that is a prefix of `fragment` (at least
       `min_overlap` characters, within `window`) is not repeated.
    3. Failing that, the same is tried ignoring whitespace at the seam (the model
       often drops or adds the space or newline it stopped at).
    4. Otherwise the fragment is appended as is: a continuation may start mid-word.
    Comparison is by code points, so Cyrillic and emoji are never split.
    """
    if not fragment:
        return accumulated
    if not accumulated:
        return fragment
    tail = accumulated[-window:]
    trimmed = fragment.strip()
    if len(trimmed) >= min_overlap and trimmed in tail:
        return accumulated
    head = fragment[:window]
    size = _overlap(tail, head, min_overlap)
    if size:
        return accumulated + fragment[size:]
    base, rest = accumulated.rstrip(), fragment.lstrip()
    if (base, rest) != (accumulated, fragment):
        size = _overlap(base[-window:], rest[:window], min_overlap)
        if size:
            return base + rest[size:]
    return accumulated + fragment


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


class _Progress:
    """What the UI sees while a continuation streams: the repeated seam is held back.

    Until the fragment stops matching the end of the text, nothing new is shown;
    after that the merge is computed once and later pieces are appended, so each
    delta costs O(window) in C rather than a merge per delta.
    """

    def __init__(self, accumulated: str, on_text: OnText) -> None:
        self._accumulated = accumulated
        self._tail = accumulated[-OVERLAP_WINDOW:].rstrip()
        self._on_text = on_text
        self._fragment: list[str] = []
        self._shown: str | None = None

    async def __call__(self, piece: str) -> None:
        if self._shown is not None:
            self._shown += piece
            await self._on_text(self._shown)
            return
        self._fragment.append(piece)
        so_far = "".join(self._fragment)
        if len(so_far) < OVERLAP_WINDOW and so_far.lstrip() in self._tail:
            return  # still repeating (or not yet distinguishable): nothing new to show
        self._shown = merge_with_overlap(self._accumulated, so_far)
        await self._on_text(self._shown)


def strip_fences(text: str) -> str:
    """Remove a Markdown code fence (```json … ```) around a JSON answer."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = _CLOSE_FENCE.sub("", _OPEN_FENCE.sub("", stripped, count=1), count=1)
    return stripped.strip()


def parse_json_answer(text: str) -> tuple[str, Any, bool, bool]:
    """(text, value, valid, repaired): parse, or repair with json_repair when broken."""
    text = strip_fences(text)
    try:
        return text, json.loads(text), True, False
    except json.JSONDecodeError:
        pass
    value = repair_json(text, return_objects=True)
    if value == "" and text.strip() not in ('""', "''"):
        return text, None, False, False  # json_repair's answer for "nothing salvageable"
    return json.dumps(value, ensure_ascii=False), value, True, True


async def collect_answer(
    completer: Completer,
    request: CompletionRequest,
    *,
    continuation_prompt: str,
    max_continuations: int,
    on_text: OnText | None = None,
) -> CollectedAnswer:
    """Ask, then keep asking the model to continue while it is cut off by the token limit.

    A `ModelError` on the first call propagates (there is nothing to keep). One on
    a continuation ends collection: the text so far is returned with
    `complete=False` and the error in `error`, because losing a long answer is worse
    than delivering it with a note.

    Continuations are requested without `json_mode`: a provider enforcing a JSON
    object could not emit the rest of one; the whole text is parsed at the end.
    """

    async def first_delta(piece: str) -> None:
        pieces.append(piece)
        assert on_text is not None
        await on_text("".join(pieces))

    pieces: list[str] = []
    first = await completer.complete(request, first_delta if on_text is not None else None)
    text = first.text
    finish_reason, model = first.finish_reason, first.model
    usage, extras = first.usage, dict(first.extras)
    continuations = 0
    error: ModelError | None = None
    follow_up = dataclasses.replace(request, json_mode=False)

    while finish_reason == "length" and continuations < max_continuations:
        messages = [
            *request.messages,
            {"role": "assistant", "content": text},
            {"role": "user", "content": continuation_prompt},
        ]
        progress = _Progress(text, on_text) if on_text is not None else None
        try:
            part = await completer.complete(
                dataclasses.replace(follow_up, messages=messages), progress
            )
        except ModelError as exc:
            error = exc
            break
        continuations += 1
        usage = usage + part.usage
        extras.update(part.extras)
        model, finish_reason = part.model or model, part.finish_reason
        fragment = part.text
        if request.json_mode and fragment.lstrip().startswith("```"):
            fragment = _OPEN_FENCE.sub("", fragment, count=1)  # a restated fence, not content
        merged = merge_with_overlap(text, fragment)
        if merged == text:
            break  # the model only repeated itself: asking again would loop
        text = merged
        if on_text is not None:
            await on_text(text)

    answer = CollectedAnswer(
        text=text,
        complete=error is None and finish_reason not in _INCOMPLETE_REASONS,
        finish_reason=finish_reason,
        continuations=continuations,
        usage=usage,
        model=model,
        extras=extras,
        error=error,
    )
    if request.json_mode:
        answer.text, answer.json_value, answer.json_valid, answer.json_repaired = parse_json_answer(
            text
        )
    return answer
