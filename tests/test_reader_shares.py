"""Per-owner shares of the reader pool (`media.reader_shares`): an owner past its share
waits for its own earlier reads, never for other owners'."""

from __future__ import annotations

import asyncio

import pytest

from media.reader_shares import ReaderShares


async def hold(shares: ReaderShares, owner: str | None, release: asyncio.Event) -> str:
    async with shares.turn(owner):
        await release.wait()
    return "done"


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def entered(shares: ReaderShares, owner: str | None, log: list[str], name: str) -> None:
    async with shares.turn(owner):
        log.append(name)


async def test_an_owner_past_its_share_waits_until_its_earlier_read_ends() -> None:
    shares = ReaderShares(readers=3)  # a share of two
    first, second = asyncio.Event(), asyncio.Event()
    holding = [
        asyncio.create_task(hold(shares, "a", first)),
        asyncio.create_task(hold(shares, "a", second)),
    ]
    log: list[str] = []
    waiting = asyncio.create_task(entered(shares, "a", log, "a3"))
    others = asyncio.create_task(entered(shares, "b", log, "b1"))
    unbound = asyncio.create_task(entered(shares, None, log, "none"))
    await settle()

    assert log == ["b1", "none"]
    assert not waiting.done()
    first.set()
    await asyncio.gather(*holding[:1])
    await waiting
    assert log == ["b1", "none", "a3"]
    second.set()
    await asyncio.gather(holding[1], others, unbound)


@pytest.mark.parametrize("ending", ["cancelled", "refused"])
async def test_a_cancelled_or_refused_read_gives_its_owner_s_place_back(ending: str) -> None:
    shares = ReaderShares(readers=2)  # a share of one

    go = asyncio.Event()

    async def refused() -> None:
        async with shares.turn("a"):
            await go.wait()
            raise ValueError("refused")

    earlier = asyncio.create_task(hold(shares, "a", go) if ending == "cancelled" else refused())
    await settle()
    log: list[str] = []
    later = asyncio.create_task(entered(shares, "a", log, "a2"))
    await settle()
    assert log == []
    if ending == "cancelled":
        earlier.cancel()
    else:
        go.set()
    with pytest.raises((asyncio.CancelledError, ValueError)):
        await earlier
    await later

    assert log == ["a2"]
    assert shares.owners() == 0  # nothing kept for owners with no read


def test_an_owner_s_share_leaves_one_reader_for_the_others_when_there_are_two_or_more() -> None:
    assert [ReaderShares(readers).share for readers in (1, 2, 3, 4)] == [1, 1, 2, 3]
