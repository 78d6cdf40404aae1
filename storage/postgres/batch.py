"""Group commit: calls made while one statement runs are sent together by the next one.

Invariants:
- A call returns only once the statement carrying its item finished, with its own
  result (or the statement's error): batching never acknowledges early.
- Items go out in the order they were submitted, at most `max_batch` per statement; one
  statement at a time per `BatchedStatement`, so a lone call is sent at once (no waiting for
  company) and under load each round trip carries everything that queued meanwhile.
- A caller that is cancelled does not cancel the statement its item is in (other
  callers share it); the item is still written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

I = TypeVar("I")  # noqa: E741
R = TypeVar("R")

MAX_BATCH = 500

Run = Callable[[Sequence[I]], Awaitable[Sequence[R]]]
"""Write a batch in one statement; return one result per item, in the items' order."""


class BatchedStatement(Generic[I, R]):
    """Calls of one kind gathered into one statement: each `__call__` item waits for the
    statement carrying it and gets its own result."""

    def __init__(self, run: Run[I, R], *, max_batch: int = MAX_BATCH) -> None:
        self._run = run
        self._max_batch = max_batch
        self._waiting: list[tuple[I, asyncio.Future[R]]] = []
        self._writing: asyncio.Task[None] | None = None

    async def __call__(self, item: I) -> R:
        result: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, result))
        if self._writing is None:
            self._writing = asyncio.create_task(self._write_waiting())
        return await asyncio.shield(result)

    async def _write_waiting(self) -> None:
        try:
            while self._waiting:
                batch = self._waiting[: self._max_batch]
                del self._waiting[: self._max_batch]
                await self._write(batch)
        finally:
            self._writing = None

    async def _write(self, batch: list[tuple[I, asyncio.Future[R]]]) -> None:
        try:
            results = await self._run([item for item, _ in batch])
        except Exception as error:
            for _, result in batch:
                if not result.done():
                    result.set_exception(error)
            return
        except BaseException:  # cancelled with its owner: so are the callers
            for _, result in batch:
                result.cancel()
            raise
        if len(results) != len(batch):
            mismatch = RuntimeError(f"{len(results)} results for a batch of {len(batch)}")
            for _, result in batch:
                if not result.done():
                    result.set_exception(mismatch)
            return
        for (_, result), value in zip(batch, results, strict=True):
            if not result.done():
                result.set_result(value)
