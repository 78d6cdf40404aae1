"""Collecting one final answer across calls when the model is cut off.

Invariants: the collected text is the first reply followed by each continuation
with the part it repeats removed; nothing the model already
delivered is lost — not even when a continuation fails — and the loop always ends
(on "stop", on a fragment that adds nothing, after `max_continuations`, or at
`max_chars`, where the stream being read is closed and the answer is cut off).

A reply is cut off when the token limit stopped it ("length") or when its stream
just ended without a finish_reason (a server giving up, e.g. on a prompt over its
context); only a final answer (`continue_if`) is continued.

Streaming costs O(1) per delta: pieces are kept in a list, and the whole text is
built and handed to `on_text` only after it grew by 1/`FORWARD_SHARE` or
`FORWARD_INTERVAL` passed — so the copies add up to a small multiple of the answer,
not its square — and once more at the end, so `on_text` always ends on the text
collected so far.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from json_repair import repair_json

from core.errors import ModelError
from core.models import Usage
from core.ports import Completer, Completion, CompletionRequest
from core.repetition import RepetitionGuard
from core.seams import drop_opener, join

OnText = Callable[[str], Awaitable[None]]

MIN_OVERLAP = 4
"""Shorter seams are taken as coincidence: a model continuing exactly where it
stopped often starts with a letter or two the text happens to end with."""

OVERLAP_WINDOW = 4000
"""Only the last characters are searched: a model repeats its last lines, not pages."""

FORWARD_SHARE = 32
"""Growth by this fraction of the text (1/32) is forwarded at once."""

FORWARD_INTERVAL = 0.05
"""Seconds after which any growth is forwarded: a slow stream still shows each piece."""

CAPPED = "max_chars"
"""The finish_reason of an answer stopped at `max_chars` by the engine itself."""

LOOPED = "repetition"
"""The finish_reason of an answer stopped because it fell into a loop (`core.repetition`)."""

OPENER_LOOKAHEAD = 80
"""Characters of a continuation held back before it is shown, so that a restart's opening
phrase (`core.seams`) is recognised before any of it reaches the screen."""

_CUT_OFF = frozenset({"length", None})  # the model would have said more: continue a final one
_INCOMPLETE_REASONS = frozenset({"length", "content_filter", None, CAPPED, LOOPED})
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
    4. A fragment opening with a restart's phrase ("Sure! Here's the continuation:",
       `core.seams`) loses the phrase, and rules 1–3 are tried on the rest.
    5. Otherwise the fragment is joined as is — a continuation may start mid-word — or,
       when it starts a new sentence or block after a word, after a space or a
       paragraph break (`core.seams.join`).
    Comparison is by code points, so Cyrillic and emoji are never split.
    """
    if not fragment:
        return accumulated
    if not accumulated:
        return fragment
    merged = _merge_overlapping(accumulated, fragment, min_overlap, window)
    if merged is not None:
        return merged
    rest = drop_opener(fragment)
    if rest is not fragment:
        merged = _merge_overlapping(accumulated, rest, min_overlap, window)
        if merged is not None:
            return merged
    return join(accumulated, rest)


def _merge_overlapping(
    accumulated: str, fragment: str, min_overlap: int, window: int
) -> str | None:
    """Rules 1–3 of `merge_with_overlap`; None when the two do not overlap."""
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
    return None


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


class _TooLong(Exception):
    """Raised from a delta callback past `max_chars`: the completer closes its stream."""


class _Looping(Exception):
    """Raised from a delta callback when the text fell into a loop: the stream is closed."""

    def __init__(self, cut: int) -> None:
        super().__init__(cut)
        self.cut = cut  # characters to remove from the end of the text


class _Pieces:
    """The text of one streamed call, forwarded whole to `on_text` at a bounded rate.

    `add` costs O(1) (amortised): forwarding builds the whole text, O(total), but only
    after the text grew by 1/`FORWARD_SHARE` since the last forward or `FORWARD_INTERVAL`
    passed. `base` is the text before this call's pieces (a continuation's merged seam).
    """

    def __init__(
        self, base: str, on_text: OnText | None, *, limit: int, clock: Callable[[], float]
    ) -> None:
        self._base = base
        self._pieces: list[str] = []
        self._size = len(base)
        self._limit = limit
        self._on_text = on_text
        self._clock = clock
        self._pending = 0  # characters not forwarded yet
        self._forwarded_at = -math.inf

    async def add(self, piece: str) -> None:
        room = self._limit - self._size
        if len(piece) > room:
            self._pieces.append(piece[: max(room, 0)])
            self._pending += max(room, 0)
            self._size = self._limit
            raise _TooLong
        self._pieces.append(piece)
        self._size += len(piece)
        if self._on_text is None:
            return
        self._pending += len(piece)
        now = self._clock()
        if (
            self._pending * FORWARD_SHARE >= self._size
            or now - self._forwarded_at >= FORWARD_INTERVAL
        ):
            await self._forward(now)

    async def flush(self) -> None:
        """Forward what is still pending (at the end of the call)."""
        if self._on_text is not None and self._pending:
            await self._forward(self._clock())

    def received(self) -> str:
        """What this call streamed (without `base`)."""
        if len(self._pieces) > 1:
            self._pieces[:] = ["".join(self._pieces)]  # later joins copy one string, not many
        return self._pieces[0] if self._pieces else ""

    async def _forward(self, now: float) -> None:
        assert self._on_text is not None
        self._pending = 0
        self._forwarded_at = now
        await self._on_text(self._base + self.received())


class _Progress:
    """What the UI sees while a continuation streams: the repeated seam is held back.

    Until the fragment stops matching the end of the text, nothing new is shown (each
    delta then costs O(window)); after that the merge is computed once and later pieces
    go through `_Pieces`, O(1) each.
    """

    def __init__(
        self, accumulated: str, on_text: OnText | None, *, limit: int, clock: Callable[[], float]
    ) -> None:
        self._accumulated = accumulated
        self._tail = accumulated[-OVERLAP_WINDOW:].rstrip()
        self._on_text = on_text
        self._limit = limit
        self._clock = clock
        self._fragment: list[str] = []
        self._size = len(accumulated)
        self._merged: _Pieces | None = None
        self._merged_from = ""  # the fragment text the merge was computed from

    async def add(self, piece: str) -> None:
        if self._merged is not None:
            await self._merged.add(piece)
            return
        room = self._limit - self._size
        self._fragment.append(piece[: max(room, 0)])
        self._size += len(self._fragment[-1])
        if len(piece) > room:
            raise _TooLong
        so_far = "".join(self._fragment)
        if len(so_far) < OPENER_LOOKAHEAD:
            return  # may still be a restart's opening phrase
        rest = drop_opener(so_far)
        if len(rest) < OVERLAP_WINDOW and rest.lstrip() in self._tail:
            return  # still repeating (or not yet distinguishable): nothing new to show
        self._merged_from = so_far
        self._merged = _Pieces(
            merge_with_overlap(self._accumulated, so_far),
            self._on_text,
            limit=self._limit,
            clock=self._clock,
        )
        await self._merged.add("")

    def received(self) -> str:
        """The fragment this continuation streamed so far."""
        if self._merged is not None:
            return self._merged_from + self._merged.received()
        return "".join(self._fragment)


async def _complete(
    completer: Completer, request: CompletionRequest, sink: _Pieces | _Progress, before: str
) -> tuple[Completion, int]:
    """One call streamed into `sink`, and how many characters to cut from the end of the
    text it makes (a loop's repetitions). Past its limit, what arrived, marked `CAPPED`;
    fallen into a loop, what arrived, marked `LOOPED`. `before`: the text it continues."""
    guard = RepetitionGuard(before)

    async def on_delta(piece: str) -> None:
        await sink.add(piece)
        cut = guard.add(piece)
        if cut is not None:
            raise _Looping(cut)

    try:
        return await completer.complete(request, on_delta), 0
    except _TooLong:
        return Completion(text=sink.received(), finish_reason=CAPPED, model=""), 0
    except _Looping as loop:
        return Completion(text=sink.received(), finish_reason=LOOPED, model=""), loop.cut


def _cut(text: str, chars: int) -> str:
    """`text` without its last `chars` characters."""
    return text[: max(len(text) - chars, 0)] if chars else text


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

    A text that falls into a loop (`core.repetition`) is stopped there: the stream is
    closed, the repetitions are cut (the first occurrence stays), finish_reason `LOOPED`,
    `complete=False`, and it is not continued.

    `continuation_prompt` is the user turn asking to continue, or a function of the text
    so far giving it. Continuations are requested without `json_mode` (a provider
    enforcing a JSON object could not emit the rest of one; the whole text is parsed at
    the end) and with `follow_up_max_tokens` when given. Provider extras (sources) are
    the first call's: its text's [n] markers refer to them; a continuation only adds what
    the first call did not have.
    """
    pieces = _Pieces("", on_text, limit=max_chars, clock=clock)
    first, cut = await _complete(completer, request, pieces, "")
    await pieces.flush()
    text = _cut(first.text[:max_chars], cut)
    if cut and on_text is not None:
        await on_text(text)
    finish_reason, model = first.finish_reason, first.model or request.model
    usage, extras = first.usage, dict(first.extras)
    continuations = 0
    error: ModelError | None = None
    follow_up = dataclasses.replace(request, json_mode=False)
    if follow_up_max_tokens is not None:
        follow_up = dataclasses.replace(follow_up, max_tokens=follow_up_max_tokens)
    wanted = finish_reason in _CUT_OFF and (continue_if is None or continue_if(text))

    while wanted and finish_reason in _CUT_OFF and continuations < max_continuations:
        prompt = continuation_prompt(text) if callable(continuation_prompt) else continuation_prompt
        messages = [
            *request.messages,
            {"role": "assistant", "content": text},
            {"role": "user", "content": prompt},
        ]
        progress = _Progress(text, on_text, limit=max_chars, clock=clock)
        try:
            part, cut = await _complete(
                completer, dataclasses.replace(follow_up, messages=messages), progress, text
            )
        except ModelError as exc:
            error = exc
            break
        continuations += 1
        usage = usage + part.usage
        for key, value in part.extras.items():
            if not extras.get(key):
                extras[key] = value
        model, finish_reason = part.model or model, part.finish_reason
        fragment = part.text
        if request.json_mode and fragment.lstrip().startswith("```"):
            fragment = _OPEN_FENCE.sub("", fragment, count=1)  # a restated fence, not content
        merged = _cut(merge_with_overlap(text, fragment), cut)
        if len(merged) > max_chars:
            merged, finish_reason = merged[:max_chars], CAPPED
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
