"""Turns in progress, per chat key, so a reset can stop one instead of queueing behind it.

A turn holds its chat's lock while the model answers, which may take minutes. A
reset must not wait for that: `RunningTurns.stop(key)` cancels the model call of
the chat's running turn, or makes its next model call refuse to start. Only the
model call is ever cancelled, never a store write, so a stopped turn ends at a
clean point: its caller gets `TurnCancelled` and no reply was stored.

The turn is found through a context variable set by `turn()`: the model call runs
in the same task (or one it started), so the completer wrapper needs no arguments
beyond the `Completer` protocol's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from core.domain.errors import TurnCancelled
from core.domain.ports import ChatLocks, Completer, Completion, CompletionRequest, OnDelta
from core.primitives.intake_gate import leave_intake


@dataclass(slots=True)
class _Turn:
    stopped: bool = False
    call: asyncio.Task[object] | None = None  # the task inside a model call, while it is
    cancelled_call: bool = False  # `call` was cancelled by `stop`


_current: ContextVar[_Turn | None] = ContextVar("running_turn", default=None)


class RunningTurns:
    """Which chats have a turn running, and a way to stop one."""

    def __init__(self) -> None:
        self._turns: dict[str, _Turn] = {}

    @contextmanager
    def turn(self, key: str) -> Iterator[None]:
        """Mark `key` as answering for the block (run while holding the chat's lock)."""
        turn = _Turn()
        self._turns[key] = turn
        token = _current.set(turn)
        try:
            yield
        finally:
            _current.reset(token)
            if self._turns.get(key) is turn:
                del self._turns[key]

    def is_running(self, key: str) -> bool:
        return key in self._turns

    def stop(self, key: str) -> bool:
        """Stop the chat's running turn; True when there was one."""
        turn = self._turns.get(key)
        if turn is None:
            return False
        turn.stopped = True
        if turn.call is not None and not turn.cancelled_call:
            turn.cancelled_call = True
            turn.call.cancel()
        return True


class TurnGate:
    """Where a chat's turns run one at a time: `hold(key)` holds the chat's lock for the
    whole turn and marks it running, so a reset may stop it (`RunningTurns.stop`)."""

    def __init__(self, locks: ChatLocks, running: RunningTurns) -> None:
        self.locks = locks
        self.running = running

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        async with self.locks.hold(key):
            with self.running.turn(key):
                yield


class StoppableCompleter:
    """A `core.domain.ports.Completer` whose calls a `RunningTurns.stop` can cancel; a
    call ends its turn's intake (`core.primitives.intake_gate`), so the next turn enters."""

    def __init__(self, inner: Completer) -> None:
        self.inner = inner

    async def complete(
        self, request: CompletionRequest, on_delta: OnDelta | None = None
    ) -> Completion:
        leave_intake()
        turn = _current.get()
        if turn is None:  # not inside a turn: nothing can stop it
            return await self.inner.complete(request, on_delta)
        if turn.stopped:
            raise TurnCancelled("the turn was stopped before the model was called")
        task = asyncio.current_task()
        assert task is not None
        turn.call = task
        try:
            completion = await self.inner.complete(request, on_delta)
        except asyncio.CancelledError:
            if turn.cancelled_call and task.uncancel() == 0:
                raise TurnCancelled("the turn was stopped while the model answered") from None
            raise  # the task itself is being cancelled (shutdown)
        finally:
            turn.call = None
        if turn.cancelled_call:  # the call swallowed the cancellation and finished anyway
            task.uncancel()
            raise TurnCancelled("the turn was stopped while the model answered")
        return completion
