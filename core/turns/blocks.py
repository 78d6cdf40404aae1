"""People an operator blocked: the bot answers them as it answers someone not on its
allow-list, and the API refuses their turns (403).

Invariants: a block applies to this worker's next message of the person at once when set
here, and to other workers' within `BLOCK_CACHE_SECONDS` (each keeps what it read that
long, so a message usually costs no read for it); the cache holds at most
`BLOCK_CACHE_SIZE` people, so memory stays bounded however many write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.primitives.expiring import ReadThrough

if TYPE_CHECKING:
    from core.domain.ports import ConsultationStore

BLOCK_CACHE_SECONDS = 10.0
BLOCK_CACHE_SIZE = 100_000


class Blocks:
    """Whether a person is blocked, as the store had it at most `BLOCK_CACHE_SECONDS` ago."""

    def __init__(self, store: ConsultationStore) -> None:
        self._known = ReadThrough(store.is_blocked, BLOCK_CACHE_SECONDS, max_size=BLOCK_CACHE_SIZE)

    async def blocked(self, person: str) -> bool:
        return await self._known.get(person)

    def refresh(self, person: str) -> None:
        """Read the person's block afresh next time (an operator changed it)."""
        self._known.discard(person)
