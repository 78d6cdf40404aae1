"""Who gets the next reader (`media.reader_shares`): an owner past its share waits while
another owner waits, a lone owner uses every idle reader, and a read that ends however it
ends hands its reader on."""

from __future__ import annotations

import asyncio

import pytest

from media.reader_shares import ReaderShares


class Reads:
    """Reads entering `shares`, each held until released; `log` says who got a reader."""

    def __init__(self, shares: ReaderShares) -> None:
        self.shares = shares
        self.log: list[str] = []
        self._release: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, name: str, owner: str | None) -> None:
        self._release[name] = asyncio.Event()
        self.tasks[name] = asyncio.create_task(self._read(name, owner))

    async def _read(self, name: str, owner: str | None) -> None:
        async with self.shares.reader(owner):
            self.log.append(name)
            await self._release[name].wait()

    async def end(self, *names: str) -> None:
        for name in names:
            self._release[name].set()
            await self.tasks[name]
        await settle()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_lone_owner_uses_every_idle_reader() -> None:
    """No one else waiting: one owner's reads take both readers, not only its share."""
    reads = Reads(ReaderShares(readers=2))  # a share of one
    for name in ("m1", "m2", "m3"):
        reads.start(name, "api:mallory")
    await settle()
    assert reads.log == ["m1", "m2"]
    await reads.end("m1", "m2", "m3")
    assert reads.log == ["m1", "m2", "m3"]


async def test_once_another_owner_waits_the_next_free_reader_is_theirs() -> None:
    """Mallory holds both readers with more queued; Alice, arriving last, gets the first
    reader to come free, and Mallory's next reads wait for her own."""
    reads = Reads(ReaderShares(readers=2))
    for name in ("m1", "m2", "m3", "m4"):
        reads.start(name, "api:mallory")
    await settle()
    reads.start("alice", "api:alice")
    await settle()
    assert reads.log == ["m1", "m2"]

    await reads.end("m1")
    assert reads.log == ["m1", "m2", "alice"]
    await reads.end("alice")
    assert reads.log == ["m1", "m2", "alice", "m3"]
    await reads.end("m2", "m3", "m4")
    assert reads.shares.owners() == 0


async def test_reads_go_in_arrival_order_but_past_a_share_while_others_wait() -> None:
    reads = Reads(ReaderShares(readers=3))  # a share of two
    reads.start("a1", "a")
    reads.start("a2", "a")
    await settle()
    reads.start("a3", "a")  # lone: takes the third reader
    await settle()
    reads.start("a4", "a")
    reads.start("b1", "b")
    reads.start("none", None)
    await settle()
    assert reads.log == ["a1", "a2", "a3"]
    await reads.end("a1")
    assert reads.log[3:] == ["b1"]  # a4 arrived first, but a is at its share
    await reads.end("a2")  # a is under its share again: a4 is first in line
    assert reads.log[4:] == ["a4"]
    await reads.end("a3")
    assert reads.log[5:] == ["none"]
    await reads.end("b1", "none", "a4")


@pytest.mark.parametrize("ending", ["cancelled", "refused", "cancelled while waiting"])
async def test_a_read_that_ends_however_it_ends_hands_its_reader_on(ending: str) -> None:
    shares = ReaderShares(readers=1)
    go = asyncio.Event()

    async def earlier_read() -> None:
        async with shares.reader("a"):
            await go.wait()
            raise ValueError("refused")

    reads = Reads(shares)
    earlier = asyncio.create_task(earlier_read())
    await settle()
    if ending == "cancelled while waiting":
        reads.start("waiting", "b")
        await settle()
        reads.tasks["waiting"].cancel()
    reads.start("later", "a")
    await settle()
    assert reads.log == []
    if ending == "refused":
        go.set()
    else:
        earlier.cancel()
    with pytest.raises((asyncio.CancelledError, ValueError)):
        await earlier
    await settle()
    assert reads.log == ["later"]
    await reads.end("later")
    assert shares.owners() == 0 and shares.running() == 0


async def test_a_read_cancelled_just_as_it_is_given_a_reader_hands_it_on() -> None:
    """The reader came free and was given to a waiting read in the same moment that read
    was cancelled: the reader goes to the next one, not lost."""
    shares = ReaderShares(readers=1)
    first = shares.reader("a")
    await first.__aenter__()
    reads = Reads(shares)
    reads.start("given", "b")
    reads.start("next", "c")
    await settle()
    await first.__aexit__(None, None, None)  # its reader is given to "given", not yet run
    reads.tasks["given"].cancel()
    await settle()
    assert reads.log == ["next"]
    await reads.end("next")
    assert shares.running() == 0


def test_an_owner_s_share_leaves_one_reader_for_the_others_when_there_are_two_or_more() -> None:
    assert [ReaderShares(readers).share for readers in (1, 2, 3, 4)] == [1, 1, 2, 3]
