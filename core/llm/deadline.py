"""One deadline around each whole model call, whatever the stream does meanwhile.

The HTTP client's timeout bounds each read, so a provider or proxy that sends only
SSE comments (": keep-alive") or trickles text forever would hold the chat's turn
forever. `DeadlineCompleter` bounds the call itself: no text within
`first_token_seconds` of the start, or no end within `total_seconds`, raises
`ModelError(TIMEOUT)` like any other timeout, so the edges explain it and the round
stays unused. Time spent in the caller's `on_delta` counts: the deadline is the
caller's budget for the whole turn.
"""

from __future__ import annotations

import asyncio

from core.domain.errors import ModelError, ModelErrorKind
from core.domain.ports import Completer, Completion, CompletionRequest, OnDelta


class DeadlineCompleter:
    """A `core.domain.ports.Completer` that gives up on a call past its first-text or total
    deadline."""

    def __init__(
        self, inner: Completer, *, first_token_seconds: float, total_seconds: float
    ) -> None:
        if first_token_seconds <= 0 or total_seconds <= 0:
            raise ValueError("deadlines must be positive")
        self.inner = inner
        self.first_token_seconds = min(first_token_seconds, total_seconds)
        self.total_seconds = total_seconds

    async def complete(
        self, request: CompletionRequest, on_delta: OnDelta | None = None
    ) -> Completion:
        started = asyncio.get_running_loop().time()
        last = started + self.total_seconds

        async def delta(piece: str) -> None:
            if scope.when() != last:  # the first text: from now on only the total counts
                scope.reschedule(last)
            if on_delta is not None:
                await on_delta(piece)

        try:
            async with asyncio.timeout_at(started + self.first_token_seconds) as scope:
                return await self.inner.complete(request, delta)
        except TimeoutError as exc:
            if not scope.expired():
                raise  # some other timeout inside the call, not ours
            if scope.when() != last:
                detail = f"no text within {self.first_token_seconds:g} s"
            else:
                detail = f"no complete answer within {self.total_seconds:g} s"
            raise ModelError(ModelErrorKind.TIMEOUT, detail) from exc

    async def close(self) -> None:
        """Close the wrapped completer when it has a `close` (as `OpenAICompleter` does)."""
        close = getattr(self.inner, "close", None)
        if close is not None:
            await close()
