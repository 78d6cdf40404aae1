"""The intake gate: a few turns at a time from arrival to their model call, never stuck."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from core.primitives.intake_gate import IntakeGate, leave_intake


async def _turn(
    gate: IntakeGate,
    log: list[str],
    name: str,
    inside: list[int],
    *,
    intake: float = 0.01,
    model: float = 0.0,
) -> None:
    async with gate.enter():
        log.append(f"in {name}")
        inside.append(gate.inside)
        await asyncio.sleep(intake)
        leave_intake()
        log.append(f"model {name}")
        await asyncio.sleep(model)


async def test_no_more_turns_inside_than_slots_under_concurrency() -> None:
    gate = IntakeGate(3, hold_limit=60)
    log: list[str] = []
    inside: list[int] = []
    await asyncio.gather(*(_turn(gate, log, str(n), inside, model=0.05) for n in range(40)))
    assert max(inside) == 3
    assert gate.inside == 0
    # Waiters enter in the order they came.
    assert [entry for entry in log if entry.startswith("in ")] == [f"in {n}" for n in range(40)]


async def test_a_turn_at_its_model_call_lets_the_next_one_in() -> None:
    gate = IntakeGate(1, hold_limit=60)
    model_wait = asyncio.Event()
    all_reached = asyncio.Event()
    reached: list[str] = []

    async def turn(name: str) -> None:
        async with gate.enter():
            leave_intake()
            reached.append(name)
            if len(reached) == 5:
                all_reached.set()
            await model_wait.wait()  # the model still answering

    tasks = [asyncio.create_task(turn(str(n))) for n in range(5)]
    async with asyncio.timeout(5):
        await all_reached.wait()
    assert reached == ["0", "1", "2", "3", "4"]
    model_wait.set()
    await asyncio.gather(*tasks)
    assert gate.inside == 0


async def test_a_slow_intake_gives_its_slot_up_after_the_hold_limit() -> None:
    gate = IntakeGate(1, hold_limit=0.05)
    stuck = asyncio.Event()
    other_in = asyncio.Event()

    async def slow() -> None:
        async with gate.enter():
            await stuck.wait()  # a file that never finishes downloading

    async def quick() -> None:
        async with gate.enter():
            other_in.set()

    slow_task = asyncio.create_task(slow())
    await asyncio.sleep(0)
    async with asyncio.timeout(5):
        await quick()
    assert other_in.is_set()
    stuck.set()
    await slow_task
    assert gate.inside == 0


@pytest.mark.parametrize("ending", ["return", "raise", "cancel"])
async def test_a_turn_that_ends_without_a_model_call_gives_its_slot_back(ending: str) -> None:
    gate = IntakeGate(1, hold_limit=60)
    started = asyncio.Event()

    async def turn() -> None:
        async with gate.enter():
            started.set()
            if ending == "raise":
                raise RuntimeError("the store is down")
            if ending == "cancel":
                await asyncio.Event().wait()

    task = asyncio.create_task(turn())
    await started.wait()
    if ending == "cancel":
        task.cancel()
    with contextlib.suppress(RuntimeError, asyncio.CancelledError):
        await task
    assert gate.inside == 0
    async with asyncio.timeout(5), gate.enter():  # the next one enters at once
        assert gate.inside == 1


async def test_a_cancelled_waiter_takes_no_slot() -> None:
    gate = IntakeGate(1, hold_limit=60)
    async with gate.enter():
        waiter = asyncio.create_task(_turn(gate, [], "w", []))
        await asyncio.sleep(0.01)
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
    assert gate.inside == 0
    async with asyncio.timeout(5), gate.enter():
        pass


async def test_leaving_twice_or_from_a_child_task_gives_back_one_slot() -> None:
    gate = IntakeGate(2, hold_limit=60)
    async with gate.enter():
        assert gate.inside == 1
        await asyncio.create_task(_leave())  # a task the turn started: the model call's
        assert gate.inside == 0
        leave_intake()
        assert gate.inside == 0
    assert gate.inside == 0
    assert gate.slots == 2


async def _leave() -> None:
    leave_intake()


async def test_a_turn_inside_the_gate_never_waits_for_itself() -> None:
    gate = IntakeGate(1, hold_limit=60)
    async with asyncio.timeout(5), gate.enter(), gate.enter():
        assert gate.inside == 1


async def test_no_gate_lets_everyone_in_and_leaving_outside_a_turn_does_nothing() -> None:
    gate = IntakeGate(0)
    leave_intake()
    inside: list[int] = []
    await asyncio.gather(*(_turn(gate, [], str(n), inside) for n in range(10)))
    assert inside == [0] * 10


@pytest.mark.parametrize(("slots", "hold"), [(-1, 1.0), (2, 0.0), (2, -1.0)])
def test_a_gate_refuses_nonsense(slots: int, hold: float) -> None:
    with pytest.raises(ValueError, match="slot"):
        IntakeGate(slots, hold_limit=hold)


async def test_through_runs_a_turn_inside_the_gate_and_returns_its_result() -> None:
    gate = IntakeGate(1, hold_limit=60)

    async def turn() -> int:
        assert gate.inside == 1
        leave_intake()
        assert gate.inside == 0
        return 42

    assert await gate.through(turn()) == 42
    assert gate.inside == 0
