"""Token holds: the tokens a turn may spend, reserved before each model call and settled
by what its calls really used, so concurrent turns see each other's calls before any of
them is charged.

Invariants:
- A hold names its payer (person, client key) and UTC day; the store counts a live
  hold's tokens (`expires_at` not passed) as used by that person and that client key
  (`ConsultationStore.hold_tokens`), next to what was charged.
- A turn is admitted by taking its hold atomically with the check
  (`core.turns.quota_checks`); before each call the hold is set to what the turn's calls
  really spent so far (their reported usage) plus this call's estimated input and its
  `max_tokens` (`HoldingCompleter`). The hold is released when the turn ends, after its
  reply and its charge were stored, which settles it: in between both count, which errs
  towards refusing.
- A hold a crash left behind stops counting at `expires_at` (`HOLD_SECONDS` after its
  last change), so it can refuse a person for at most that long. Changing or releasing a
  hold once the turn was admitted is best effort: a store that fails then leaves the hold
  as it was (to expire), never the turn's answer undelivered.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import TYPE_CHECKING

from core.domain.quotas import HOLD_SECONDS, TokenHold
from core.domain.tokens import estimate_prompt_tokens, estimate_tokens

if TYPE_CHECKING:
    from core.domain.ports import (
        Completer,
        Completion,
        CompletionRequest,
        ConsultationStore,
        OnDelta,
    )

log = logging.getLogger(__name__)


def call_tokens(request: CompletionRequest) -> int:
    """What one call may spend: its estimated input and its output budget."""
    return estimate_prompt_tokens(request.messages) + (request.max_tokens or 0)


def turn_tokens(text: str, budget: int | None) -> int:
    """What a turn is reserved before its first request is built: its new text's estimate
    and the output budget (each call's own reservation then replaces it)."""
    return estimate_tokens(text) + (budget or 0)


class Held:
    """A turn's hold while the turn runs: what its calls spent (`spent`) and reserve."""

    def __init__(
        self, store: ConsultationStore, hold: TokenHold, clock: Callable[[], float]
    ) -> None:
        self._store = store
        self._clock = clock
        self.hold = hold
        self.spent = 0

    async def reserve(self, tokens: int) -> None:
        """Hold what the turn spent plus `tokens` for the call about to be made."""
        await self._resize(self.spent + tokens)

    def settle(self, tokens: int) -> None:
        """The call spent `tokens`: the next reservation starts from what the turn spent
        (the hold keeps the larger reservation until then, or until its release)."""
        self.spent += tokens

    async def release(self) -> None:
        try:
            await self._store.release_hold(self.hold.id)
        except Exception as exc:  # it expires; the turn's outcome stands
            log.warning("a quota hold was not released: %s", exc)

    async def _resize(self, tokens: int) -> None:
        if tokens == self.hold.tokens:
            return
        resized = replace(self.hold, tokens=tokens, expires_at=self._clock() + HOLD_SECONDS)
        try:
            await self._store.resize_hold(resized.id, tokens, resized.expires_at)
        except Exception as exc:  # the hold stays as stored; the turn goes on
            log.warning("a quota hold was not changed: %s", exc)
            return
        self.hold = resized


_current: ContextVar[Held | None] = ContextVar("quota_hold", default=None)


@asynccontextmanager
async def holding(held: Held | None) -> AsyncIterator[None]:
    """Run a turn under `held` (None: nothing held, whatever a task it came from held),
    released when it ends however."""
    token = _current.set(held)
    try:
        yield
    finally:
        _current.reset(token)
        if held is not None:
            await held.release()


class HoldingCompleter:
    """A `core.domain.ports.Completer` that reserves each call's tokens in the turn's hold first
    and counts what it spent after (a call outside a held turn passes straight through)."""

    def __init__(self, inner: Completer) -> None:
        self.inner = inner

    async def complete(
        self, request: CompletionRequest, on_delta: OnDelta | None = None
    ) -> Completion:
        held = _current.get()
        if held is None:
            return await self.inner.complete(request, on_delta)
        await held.reserve(call_tokens(request))
        completion = await self.inner.complete(request, on_delta)
        held.settle(completion.usage.total_tokens)
        return completion
