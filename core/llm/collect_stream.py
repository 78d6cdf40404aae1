"""One streamed call of a collected answer: shown as it arrives, stopped at a cap or a loop.

Invariants: each delta costs O(1) (amortised) — pieces are kept in a list, and the whole
text is built and handed to `on_text` only after it grew by 1/`FORWARD_SHARE` or
`FORWARD_INTERVAL` passed, so the copies add up to a small multiple of the answer, not
its square — and `flush` forwards the rest, so `on_text` ends on the text received. A
call never streams past its `limit`: the stream is closed there and what arrived is kept
(finish_reason `CAPPED`); one that falls into a loop (`core.llm.repetition`) is closed too
(finish_reason `LOOPED`, with how much to cut). A continuation shows nothing of the seam
it repeats nor of a restart's opening phrase (`core.llm.seams`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from core.domain.consultation import Usage
from core.domain.ports import Completer, Completion, CompletionRequest, OnText
from core.domain.tokens import estimate_prompt_tokens, estimate_tokens
from core.llm.overlap import OVERLAP_WINDOW, merge_with_overlap
from core.llm.repetition import RepetitionGuard
from core.llm.seams import drop_opener

FORWARD_SHARE = 32
"""Growth by this fraction of the text (1/32) is forwarded at once."""

FORWARD_INTERVAL = 0.05
"""Seconds after which any growth is forwarded: a slow stream still shows each piece."""

CAPPED = "max_chars"
"""The finish_reason of an answer stopped at `max_chars` by the engine itself."""

LOOPED = "repetition"
"""The finish_reason of an answer stopped because it fell into a loop (`core.llm.repetition`)."""

OPENER_LOOKAHEAD = 80
"""Characters of a continuation held back before it is shown, so that a restart's opening
phrase (`core.llm.seams`) is recognised before any of it reaches the screen."""


class StreamStopped(Exception):
    """Raised from a delta callback to close the stream being read. `spent` is the usage
    of the calls made before that one for the same answer (a turn's tool calls): each
    completer it passes through that made some adds theirs, so a stopped answer is
    charged for every call it took."""

    def __init__(self) -> None:
        super().__init__()
        self.spent = Usage()


class _TooLong(StreamStopped):
    """Raised from a delta callback past `max_chars`: the completer closes its stream."""


class _Looping(StreamStopped):
    """Raised from a delta callback when the text fell into a loop: the stream is closed."""

    def __init__(self, cut: int) -> None:
        super().__init__()
        self.cut = cut  # characters to remove from the end of the text


class Pieces:
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


class Progress:
    """What the UI sees while a continuation streams: the repeated seam is held back.

    Until the fragment stops matching the end of the text, nothing new is shown (each
    delta then costs O(window)); after that the merge is computed once and later pieces
    go through `Pieces`, O(1) each.
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
        self._merged: Pieces | None = None
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
        self._merged = Pieces(
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


async def stream_call(
    completer: Completer, request: CompletionRequest, sink: Pieces | Progress, before: str
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
    except _TooLong as stop:
        return _stopped(request, sink.received(), CAPPED, stop), 0
    except _Looping as loop:
        return _stopped(request, sink.received(), LOOPED, loop), loop.cut


def _stopped(request: CompletionRequest, text: str, reason: str, stop: StreamStopped) -> Completion:
    """What a stream closed by the engine gave: its text, and its usage estimated (the
    closed stream never reached its usage chunk) on top of the calls before it."""
    usage = Usage(estimate_prompt_tokens(request.messages), estimate_tokens(text), estimated=True)
    return Completion(text=text, finish_reason=reason, model="", usage=stop.spent + usage)
