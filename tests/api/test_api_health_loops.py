"""`/healthz` watches the process's long-lived loops: 503 naming the loop and why when one
has ended or is stuck, 200 naming each as "ok" while they do their job."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from telemetry.supervision import Pace, supervise
from tests.api_harness import RunningApi

STEADY = Pace(interval=0.01, longest=60)


class Killed(BaseException):
    """Not an `Exception`: what ends a loop for good (an exit, a bug in the loop itself)."""


@contextlib.asynccontextmanager
async def loop(
    api: RunningApi, name: str, body: Callable[[], Awaitable[None]], pace: Pace = STEADY
) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(supervise(name, body, pace, api.loops))
    await asyncio.sleep(0)  # it has registered and started its first iteration
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Killed):
            await task


async def test_healthy_loops_are_named_ok(api: RunningApi) -> None:
    async def tick() -> None:
        return None

    async with loop(api, "inbox", tick), loop(api, "cleanup", tick):
        response = await api.client.get("/healthz")
        assert response.status == 200
        body = await response.json()
        assert body["status"] == "ok"
        assert body["loops"] == {"cleanup": "ok", "inbox": "ok"}


async def test_a_loop_that_ended_makes_the_process_unhealthy(api: RunningApi) -> None:
    """One loop killed by a BaseException, another cancelled: 503, each named with why,
    while the loop that still runs is "ok"."""
    killed = asyncio.Event()

    async def die() -> None:
        killed.set()
        raise Killed("the loop's own bug")

    async def tick() -> None:
        return None

    async with (
        loop(api, "inbox", die) as inbox,
        loop(api, "polling", tick) as polling,
        loop(api, "cleanup", tick),
    ):
        await killed.wait()
        with contextlib.suppress(Killed):
            await inbox
        polling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await polling
        response = await api.client.get("/healthz")
        assert response.status == 503
        body = await response.json()
        assert body["status"] == "unavailable"
        assert body["store"] is True
        assert body["loops"] == {
            "inbox": "ended by Killed: the loop's own bug",
            "polling": "cancelled",
            "cleanup": "ok",
        }


async def test_a_stuck_loop_makes_the_process_unhealthy(api: RunningApi) -> None:
    """An iteration that runs past the loop's `longest` (here 10 ms: it waits forever)."""
    entered = asyncio.Event()
    never = asyncio.Event()

    async def hang() -> None:
        entered.set()
        await never.wait()

    async with loop(api, "inbox", hang, Pace(interval=0.01, longest=0.01)):
        await entered.wait()
        await asyncio.sleep(0.05)  # past the bound; the iteration goes on for ever
        response = await api.client.get("/healthz")
        assert response.status == 503
        [why] = (await response.json())["loops"].values()
        assert why.startswith("stuck: one iteration has run for")
