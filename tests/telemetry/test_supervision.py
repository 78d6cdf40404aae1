"""Supervised loops outlive their failures with back-off and a log line naming them; the
registry says when one has ended, is stuck, or makes no progress."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import pytest

from core.domain.errors import StoreUnavailable
from telemetry.supervision import LoopRegistry, Pace, supervise

QUICK = Pace(interval=0.001, longest=60, first_retry=0.001, max_retry=0.002)
WAIT = 20.0


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Stop(BaseException):
    """Something that is not an `Exception`: it ends a loop."""


def start(
    loops: LoopRegistry, body: Callable[[], Awaitable[float | None]], pace: Pace = QUICK
) -> asyncio.Task[None]:
    return asyncio.create_task(supervise("demo", body, pace, loops))


async def finish(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Stop):
        await task


async def test_a_loop_survives_any_exception_and_logs_it_with_its_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A RuntimeError (with its traceback) and a store outage (a warning) are logged with
    the loop's name; the loop goes on and a later iteration succeeds."""
    failures: list[Exception] = [RuntimeError("a bug"), StoreUnavailable("the database is down")]
    succeeded = asyncio.Event()

    async def body() -> None:
        if failures:
            raise failures.pop(0)
        succeeded.set()

    loops = LoopRegistry()
    with caplog.at_level(logging.WARNING, logger="telemetry.supervision"):
        task = start(loops, body)
        await asyncio.wait_for(succeeded.wait(), WAIT)
    assert not task.done()
    await finish(task)
    logged = [(r.levelno, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert logged[0][0] == logging.ERROR and logged[0][1].startswith("demo failed")
    assert logged[0][2]  # the traceback
    assert logged[1][0] == logging.WARNING and "demo: the database is down" in logged[1][1]


def test_the_wait_after_failures_doubles_up_to_the_cap_with_jitter() -> None:
    pace = Pace(interval=1, longest=10, first_retry=0.5, max_retry=4)
    assert [pace.retry_delay(n) for n in range(1, 7)] == [0.5, 1, 2, 4, 4, 4]
    assert pace.retry_delay(3, jitter=0.5) == 1
    assert pace.retry_delay(10_000) == 4  # no overflow however long the outage


async def test_success_resets_the_back_off() -> None:
    """After a success, the count of failures in a row starts again."""
    steps = iter([RuntimeError("1"), RuntimeError("2"), None, RuntimeError("3"), "done"])
    done = asyncio.Event()
    seen: list[int] = []
    loops = LoopRegistry()

    async def body() -> None:
        state = loops.state("demo")
        assert state is not None
        seen.append(state.failures)
        step = next(steps)
        if isinstance(step, Exception):
            raise step
        if step == "done":
            done.set()
            await asyncio.Event().wait()  # no further iteration before the test stops it

    task = start(loops, body)
    await asyncio.wait_for(done.wait(), WAIT)
    await finish(task)
    assert seen == [0, 1, 2, 0, 1]


async def test_a_loop_ended_by_a_base_exception_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Not an Exception: the loop ends, logs it at once, and the registry names it."""

    async def body() -> None:
        raise Stop("exit")

    loops = LoopRegistry()
    task = start(loops, body)
    with pytest.raises(Stop):
        await task
    assert loops.problems() == {"demo": "ended by Stop: exit"}
    assert any(r.levelno == logging.CRITICAL and "demo" in r.getMessage() for r in caplog.records)


async def test_a_cancelled_or_stopped_loop_is_reported() -> None:
    loops = LoopRegistry()
    never = asyncio.Event()

    async def wait_forever() -> None:
        await never.wait()

    task = start(loops, wait_forever)
    await asyncio.sleep(0)
    assert loops.problems() == {}
    await finish(task)
    assert loops.problems() == {"demo": "cancelled"}

    stop = asyncio.Event()

    async def stop_now() -> None:
        stop.set()

    await supervise("demo", stop_now, QUICK, loops, stop=stop)
    assert loops.problems() == {"demo": "stopped"}


async def test_an_iteration_running_longer_than_allowed_is_stuck() -> None:
    clock = Clock()
    loops = LoopRegistry(clock)
    entered = asyncio.Event()
    never = asyncio.Event()

    async def hang() -> None:
        entered.set()
        await never.wait()

    task = start(loops, hang, Pace(interval=1, longest=30))
    await entered.wait()
    clock.now += 30
    assert loops.problems() == {}
    clock.now += 1
    stuck = "stuck: one iteration has run for 31 s (at most 30 s expected)"
    assert loops.problems() == {"demo": stuck}
    await finish(task)


@pytest.mark.parametrize("error", [StoreUnavailable("down"), RuntimeError("bug")], ids=type)
async def test_failing_every_time_goes_stale_waiting_for_the_database_does_not(
    error: Exception,
) -> None:
    """Iterations that raise a bug are no progress: past `stale_after` the loop is
    unhealthy. Iterations that find the store unavailable are progress: a loop waiting
    for the database is alive (the store ping reports the outage)."""
    clock = Clock()
    loops = LoopRegistry(clock)
    pace = Pace(interval=1, longest=10, first_retry=0.001, max_retry=0.001)
    attempts = 0
    enough = asyncio.Event()
    never = asyncio.Event()

    async def body() -> None:
        nonlocal attempts
        attempts += 1
        clock.now += 5
        if attempts == 5:  # 25 s since the start: past stale_after (10 + 2 * 1 s)
            enough.set()
            await never.wait()
        raise error

    task = start(loops, body, pace)
    await asyncio.wait_for(enough.wait(), WAIT)
    problems = loops.problems()
    await finish(task)
    if isinstance(error, StoreUnavailable):
        assert problems == {}
    else:
        assert problems == {
            "demo": "no progress for 25 s (at most 12 s expected); last error: RuntimeError: bug"
        }


async def test_a_parts_loops_sit_beside_the_processs_and_go_when_forgotten() -> None:
    """A stored bot's "demo" loop (a part of the registry) never replaces the process's
    own "demo"; once its part is forgotten, its cancelled loop is no problem."""
    loops = LoopRegistry()
    part = loops.part(":bot2")
    never = asyncio.Event()

    async def wait_forever() -> None:
        await never.wait()

    own, bots = start(loops, wait_forever), start(part, wait_forever)
    await asyncio.sleep(0)
    assert loops.names() == ["demo", "demo:bot2"]
    await finish(bots)
    assert loops.problems() == {"demo:bot2": "cancelled"}
    part.forget()
    assert loops.names() == ["demo"] and loops.problems() == {}
    await finish(own)
