"""The store's answers kept for a while (`core.primitives.expiring.ReadThrough`): read once per key
while fresh, read afresh after a change, never keeping what a read saw before a change."""

from __future__ import annotations

import asyncio

from core.primitives.expiring import ReadThrough


class Store:
    """Values by key, counting reads; a read can be held half-way (`hold`)."""

    def __init__(self, **values: str | None) -> None:
        self.values = dict(values)
        self.reads = 0
        self.hold: asyncio.Event | None = None
        self.reading = asyncio.Event()

    async def read(self, key: str) -> str | None:
        self.reads += 1
        value = self.values.get(key)
        self.reading.set()
        if self.hold is not None:
            await self.hold.wait()
        return value


async def test_each_key_is_read_once_while_fresh_none_included() -> None:
    store = Store(a="ru")
    cache = ReadThrough(store.read, 60)
    assert [await cache.get("a") for _ in range(5)] == ["ru"] * 5
    assert [await cache.get("b") for _ in range(5)] == [None] * 5
    assert store.reads == 2


async def test_a_discarded_key_is_read_afresh() -> None:
    store = Store(a="ru")
    cache = ReadThrough(store.read, 60)
    assert await cache.get("a") == "ru"
    store.values["a"] = "de"
    cache.discard("a")
    assert await cache.get("a") == "de"
    assert store.reads == 2


async def test_a_read_under_way_when_its_key_is_discarded_is_not_kept() -> None:
    """A read that saw the store before a change, answered after the change's discard,
    would otherwise keep the old value for the whole ttl."""
    store = Store(a="ru")
    store.hold = asyncio.Event()
    cache = ReadThrough(store.read, 60)
    before = asyncio.create_task(cache.get("a"))
    await store.reading.wait()
    store.values["a"] = "de"
    cache.discard("a")
    store.hold.set()
    assert await before == "ru"  # what the store said when it was asked
    assert await cache.get("a") == "de"
    assert await cache.get("a") == "de"
    assert store.reads == 2
