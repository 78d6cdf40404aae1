"""`bot.updates.in_flight.Handlings`: one handling per chat, within a deadline, stopped only
by a stop that names it."""

from __future__ import annotations

import asyncio

from bot.updates.in_flight import Ended, Handlings


async def never() -> None:
    await asyncio.Event().wait()


async def test_a_handling_ends_done_failed_or_past_its_deadline() -> None:
    handlings = Handlings(deadline=0.2)

    async def fails() -> None:
        raise ValueError("broken")

    assert (await handlings.run("c", 1, lambda: asyncio.sleep(0))).ended is Ended.DONE
    failed = await handlings.run("c", 2, fails)
    assert failed.ended is Ended.FAILED and isinstance(failed.error, ValueError)
    assert (await handlings.run("c", 3, never)).ended is Ended.PAST_DEADLINE


async def test_a_stop_cancels_only_the_handling_it_names() -> None:
    """`stop_before` spares the chat's later update; `stop` of another update id spares the
    running one; a stop for an update not started yet keeps it from starting."""
    handlings = Handlings(deadline=60)
    started = asyncio.Event()

    async def hangs() -> None:
        started.set()
        await never()

    running = asyncio.create_task(handlings.run("c", 10, hangs))
    await started.wait()
    handlings.stop_before("c", 10)  # a command older than the update: not it
    handlings.stop("c", 11)  # another update of the chat: remembered for later
    handlings.stop_before("other", 99)
    assert not running.done()
    handlings.stop_before("c", 12)
    assert (await running).ended is Ended.STOPPED
    ran: list[int] = []

    async def records() -> None:
        ran.append(11)

    assert (await handlings.run("c", 11, records)).ended is Ended.STOPPED
    assert ran == []
    assert (await handlings.run("c", 11, records)).ended is Ended.DONE  # asked once only
    assert ran == [11]


async def test_a_handling_that_ignores_its_cancellation_is_left_behind_after_the_grace() -> None:
    handlings = Handlings(deadline=0.1, grace=0.1)
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    outcome = await handlings.run("c", 1, stubborn)
    assert outcome.ended is Ended.PAST_DEADLINE
    release.set()
