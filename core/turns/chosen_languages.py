"""The interface language each person chose (/language), read through a cache.

Invariants: every read, choice and clearing of a person's language in a process goes
through its one `ChosenLanguages` (the service's), and so does forgetting the person
(`core.turns.memories.Memories.forget`, the web console's deletion through `refresh`): a change made
in this process applies to its next read at once. A change made in another process (another
worker on PostgreSQL, the API process's web console) applies here within
`LANGUAGE_CACHE_SECONDS`, each process keeping what it read that long, so a message usually
costs no read for it. At most `LANGUAGE_CACHE_SIZE` people are kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.primitives.expiring import ReadThrough

if TYPE_CHECKING:
    from core.domain.ports import ConsultationStore

LANGUAGE_CACHE_SECONDS = 10.0
LANGUAGE_CACHE_SIZE = 100_000


class ChosenLanguages:
    """A person's chosen interface language (None: none), as the store had it at most
    `LANGUAGE_CACHE_SECONDS` ago; which codes are offered is the edge's business."""

    def __init__(self, store: ConsultationStore) -> None:
        self._store = store
        self._known = ReadThrough(
            store.load_language, LANGUAGE_CACHE_SECONDS, max_size=LANGUAGE_CACHE_SIZE
        )

    async def of(self, person: str) -> str | None:
        """The language `person` chose; a read never waits for a running turn."""
        return await self._known.get(person)

    async def choose(self, person: str, language: str) -> None:
        """Keep `language` as `person`'s interface language."""
        try:
            await self._store.save_language(person, language)
        finally:  # even a failed write may have committed
            self._known.discard(person)

    async def clear(self, person: str) -> bool:
        """Back to the language their client names; True when they had chosen one."""
        try:
            return await self._store.delete_language(person)
        finally:
            self._known.discard(person)

    def refresh(self, person: str) -> None:
        """Read `person`'s language afresh next time (it was changed in the store directly:
        the person forgotten)."""
        self._known.discard(person)
