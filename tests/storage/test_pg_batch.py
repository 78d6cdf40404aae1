"""Group commit: calls made while a batch is written go together in the next one."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from storage.postgres.batch import BatchedStatement


class Writer:
    """A batch runner that records each batch and can be held open."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail_with: Exception | None = None

    async def run(self, items: Sequence[int]) -> list[int]:
        self.batches.append(list(items))
        await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        return [item * 10 for item in items]


async def test_a_lone_call_goes_at_once_and_calls_made_meanwhile_go_together() -> None:
    writer = Writer()
    batched = BatchedStatement(writer.run)
    writer.gate.clear()
    first = asyncio.create_task(batched(1))
    await asyncio.sleep(0)
    later = [asyncio.create_task(batched(n)) for n in (2, 3, 4)]
    await asyncio.sleep(0)
    assert writer.batches == [[1]]  # sent without waiting for company
    writer.gate.set()
    assert await asyncio.gather(first, *later) == [10, 20, 30, 40]
    assert writer.batches == [[1], [2, 3, 4]]


async def test_batches_are_cut_at_the_limit_in_order() -> None:
    writer = Writer()
    batched = BatchedStatement(writer.run, max_batch=2)
    writer.gate.clear()
    calls = [asyncio.create_task(batched(n)) for n in range(5)]
    await asyncio.sleep(0)
    writer.gate.set()
    assert await asyncio.gather(*calls) == [0, 10, 20, 30, 40]
    assert all(len(batch) <= 2 for batch in writer.batches)
    assert [item for batch in writer.batches for item in batch] == [0, 1, 2, 3, 4]


async def test_a_failed_statement_fails_every_call_in_it_and_not_the_next() -> None:
    writer = Writer()
    batched = BatchedStatement(writer.run)
    writer.gate.clear()
    first = asyncio.create_task(batched(1))
    await asyncio.sleep(0)
    second = asyncio.create_task(batched(2))
    third = asyncio.create_task(batched(3))
    await asyncio.sleep(0)
    writer.fail_with = OSError("disk full")
    writer.gate.set()
    for call in (first, second, third):
        with pytest.raises(OSError, match="disk full"):
            await call
    writer.fail_with = None
    assert await batched(4) == 40


async def test_a_cancelled_caller_leaves_its_item_in_the_statement() -> None:
    writer = Writer()
    batched = BatchedStatement(writer.run)
    writer.gate.clear()
    impatient = asyncio.create_task(batched(1))
    await asyncio.sleep(0)
    impatient.cancel()
    with pytest.raises(asyncio.CancelledError):
        await impatient
    patient = asyncio.create_task(batched(2))
    writer.gate.set()
    assert await patient == 20
    assert writer.batches == [[1], [2]]  # the cancelled call's item was still written
