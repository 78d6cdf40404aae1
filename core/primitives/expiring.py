"""A dict whose entries expire, for per-chat and per-user state kept in memory.

Invariant: an entry is visible only until its deadline (`ttl` after it was last
set) and memory is given back without scanning: entries are kept in the order
they were last set, and every read or write drops expired entries from the old
end, so each operation costs O(1) amortised. With one `ttl` for all entries, the old end
is also the first to expire and nothing expired is kept; an entry set with a
longer `ttl` may hold back the expired ones set after it until it expires too.
`max_size`, when given, drops the oldest entries beyond it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ExpiringDict(Generic[K, V]):
    def __init__(
        self,
        ttl: float,
        *,
        max_size: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._max_size = max_size
        self._clock = clock
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def set(self, key: K, value: V, *, ttl: float | None = None) -> None:
        """Store `value` until `ttl` (default: the dict's) from now; it becomes the newest."""
        now = self._clock()
        self._items[key] = (now + (self._ttl if ttl is None else ttl), value)
        self._items.move_to_end(key)
        self._expire(now)
        if self._max_size is not None:
            while len(self._items) > self._max_size:
                self._items.popitem(last=False)

    def __setitem__(self, key: K, value: V) -> None:
        self.set(key, value)

    def get(self, key: K) -> V | None:
        """The value, or None if absent or expired."""
        now = self._clock()
        self._expire(now)
        item = self._items.get(key)
        if item is None:
            return None
        if item[0] <= now:
            del self._items[key]
            return None
        return item[1]

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None  # type: ignore[arg-type]

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Remove and return the value (None or `default` if absent or expired)."""
        value = self.get(key)
        self._items.pop(key, None)
        return default if value is None else value

    def discard(self, key: K) -> None:
        self._items.pop(key, None)

    def discard_where(self, doomed: Callable[[K], bool]) -> int:
        """Remove every entry whose key is `doomed`; how many went. Scans all entries: for
        rare deletions (a person asking to be forgotten), not for a hot path."""
        keys = [key for key in self._items if doomed(key)]
        for key in keys:
            del self._items[key]
        return len(keys)

    def __len__(self) -> int:
        """Entries held, including expired ones not dropped yet (at most what `set` allows)."""
        return len(self._items)

    def _expire(self, now: float) -> None:
        items = self._items
        while items:
            key, (deadline, _) = next(iter(items.items()))
            if deadline > now:
                return
            del items[key]


class ReadThrough(Generic[K, V]):
    """What a store said about a key, kept `ttl` seconds (at most `max_size` keys): a hot
    path asks the store once per key per `ttl`. None is an answer too, kept like any other.
    `discard` makes the next `get` read afresh (the value was changed): a read that was
    already under way when a key was discarded is answered but not kept, since it may have
    seen the store before the change."""

    def __init__(
        self,
        read: Callable[[K], Awaitable[V]],
        ttl: float,
        *,
        max_size: int | None = None,
    ) -> None:
        self._read = read
        self._known: ExpiringDict[K, tuple[V]] = ExpiringDict(ttl, max_size=max_size)
        self._discards = 0  # any key's: a discard is rare, so a read it spoils is too

    async def get(self, key: K) -> V:
        known = self._known.get(key)
        if known is None:
            discards = self._discards
            known = (await self._read(key),)
            if discards == self._discards:
                self._known.set(key, known)
        return known[0]

    def discard(self, key: K) -> None:
        self._known.discard(key)
        self._discards += 1
