"""The requests the bot's model was sent during one run, as the evaluator records them.

The evaluator wraps the bot model's client (`app.runtime.open_runtime(wrap_bot_model=…)`)
in a `RecordingCompleter`. Invariant: a request is appended to the calls of the run in
whose context it was sent — a context variable `recording` sets around the run, and the
engine calls the model in its caller's task, so concurrent runs on one runtime never mix
— and a request sent outside any run is passed on unrecorded. The client-memory call is
left out: it belongs to no reply. The request is recorded before it is sent, so a call
that fails is recorded too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from core.domain.facts import SCHEMA_NAME as FACTS_SCHEMA_NAME
from core.domain.ports import Completer, Completion, CompletionRequest, OnDelta

_CALLS: ContextVar[list[CompletionRequest] | None] = ContextVar("evaluation_calls", default=None)


class RecordingCompleter:
    """A `Completer` that records each request in the current run's calls."""

    def __init__(self, inner: Completer) -> None:
        self._inner = inner

    async def complete(
        self, request: CompletionRequest, on_delta: OnDelta | None = None
    ) -> Completion:
        calls = _CALLS.get()
        if calls is not None and request.schema_name != FACTS_SCHEMA_NAME:
            calls.append(request)
        return await self._inner.complete(request, on_delta)


@contextlib.contextmanager
def recording() -> Iterator[list[CompletionRequest]]:
    """The list the bot model's requests sent inside this block are appended to."""
    calls: list[CompletionRequest] = []
    token = _CALLS.set(calls)
    try:
        yield calls
    finally:
        _CALLS.reset(token)
