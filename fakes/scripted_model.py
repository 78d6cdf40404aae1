"""An in-process `Completer`: replies are queued with `enqueue()`.

It records every request, streams each reply in a few deltas, and can be told to
fail. Tests of what the engine does with the model's answers use the fake model
server through the real SDK instead (fakes/model_server.py); this one is for
tests about the service's own logic that must stop a call at an exact point in
Python (a subclass overrides `complete`), such as its per-chat locking."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from core.domain.consultation import Usage
from core.domain.errors import ModelError, ModelErrorKind
from core.domain.ports import Completion, CompletionRequest, OnDelta


@dataclass
class _Scripted:
    text: str = ""
    finish_reason: str = "stop"
    error: ModelErrorKind | None = None


class ScriptedModel:
    def __init__(self, default: str = "What else should I know?") -> None:
        self.default = default
        self.requests: list[CompletionRequest] = []
        self._queue: deque[_Scripted] = deque()

    def enqueue(self, text: str, finish_reason: str = "stop") -> None:
        self._queue.append(_Scripted(text, finish_reason))

    def fail_next(self, kind: ModelErrorKind = ModelErrorKind.UNAVAILABLE) -> None:
        self._queue.append(_Scripted(error=kind))

    async def complete(
        self, request: CompletionRequest, on_delta: OnDelta | None = None
    ) -> Completion:
        self.requests.append(request)
        scripted = self._queue.popleft() if self._queue else _Scripted(self.default)
        if scripted.error is not None:
            raise ModelError(scripted.error, "scripted failure")
        if on_delta is not None:
            step = max(len(scripted.text) // 3, 1)
            for start in range(0, len(scripted.text), step):
                await on_delta(scripted.text[start : start + step])
        return Completion(
            text=scripted.text,
            finish_reason=scripted.finish_reason,
            model=request.model,
            usage=Usage(prompt_tokens=10, completion_tokens=len(scripted.text) // 4),
        )
