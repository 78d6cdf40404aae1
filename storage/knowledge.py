"""What both stores' knowledge bases share: rows read as documents, text made storable,
what "unchanged" means, and the memory of an empty knowledge base.

Invariants:
- text is stored without NUL characters on both stores (PostgreSQL cannot hold them);
- a chunk's vector is stored only with its chunk, one per chunk or none
  (`vector_rows`);
- a document is unchanged when its source, content hash, title and role are all the
  stored ones: storing it again writes nothing;
- `EmptyMemo` answers "empty" without asking the database for at most `ttl` seconds
  after the database said so, and never after this process changed the knowledge base:
  every model call of every consultation searches, so an empty knowledge base must cost
  no query, and another process's change is seen within `ttl`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from core.domain.embeddings import Embedded
from core.domain.knowledge import Chunk, KnowledgeBase, KnowledgeDocument, NewDocument, Passage

EMPTY_TTL_SECONDS = 1.5

VectorRow = tuple[int, str | None, bytes]
"""A stored vector as hybrid retrieval loads it: its chunk's id, its document's role (None:
every role) and the vector's bytes."""


def document_from_row(row: Sequence[Any]) -> KnowledgeDocument:
    """A row of `storage.statements.knowledge.SELECT_DOCUMENT(S)`."""
    id_, title, source, role, content_hash, added_at, chunks = row
    return KnowledgeDocument(
        int(id_), str(title), str(source), role, str(content_hash), int(chunks), float(added_at)
    )


def vector_rows(chunks: Sequence[Chunk], vectors: Embedded | None) -> list[tuple[int, str, bytes]]:
    """Each chunk's (position, model, vector) to store; none without `vectors`. A count
    that is not the chunks' is a caller's error, refused before anything is written."""
    if vectors is None:
        return []
    if len(vectors.vectors) != len(chunks):
        raise ValueError(f"{len(vectors.vectors)} vectors for {len(chunks)} chunks")
    pairs = zip(chunks, vectors.vectors, strict=True)
    return [(chunk.position, vectors.model, bytes(vector)) for chunk, vector in pairs]


def storable(text: str) -> str:
    return text.replace("\x00", "")


def unchanged(stored: KnowledgeDocument | None, document: NewDocument) -> bool:
    return (
        stored is not None
        and stored.content_hash == document.content_hash
        and stored.title == storable(document.title)
        and stored.role == document.role
    )


class EmptyMemo:
    """Whether the knowledge base was seen empty less than `ttl` seconds ago."""

    def __init__(
        self, ttl: float = EMPTY_TTL_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl = ttl
        self._clock = clock
        self._empty_until = float("-inf")
        self.changes = 0
        """How many times this process changed the knowledge base."""

    def known_empty(self) -> bool:
        return self._clock() < self._empty_until

    def saw_empty(self, changes: int) -> None:
        """The database said "empty" to a read started when `changes` was current: a
        change made meanwhile by this process wins."""
        if changes == self.changes:
            self._empty_until = self._clock() + self._ttl

    def forget(self) -> None:
        """This process changed the knowledge base: the next search asks the database."""
        self.changes += 1
        self._empty_until = float("-inf")

    async def search(
        self,
        words: Callable[[], list[str]],
        limit: int,
        count: Callable[[], Awaitable[int]],
        run: Callable[[list[str]], Awaitable[tuple[list[Passage], bool]]],
    ) -> list[Passage] | None:
        """A store's search through this memory: None at once while the knowledge base is
        known empty; for a query with no `words` (or no room), what `nothing_searched`
        says; else what `run(words)` finds — remembered as empty when it says so and
        nothing in this process changed the knowledge base meanwhile."""
        if self.known_empty():
            return None
        terms = words()
        if limit <= 0 or not terms:
            return await self.nothing_searched(count)
        changes = self.changes
        found, empty = await run(terms)
        if empty:
            self.saw_empty(changes)
            return None
        return found

    async def nothing_searched(self, count: Callable[[], Awaitable[int]]) -> list[Passage] | None:
        """What a query with no word to look for (or no room for a passage) finds: nothing,
        and None when the knowledge base is empty (`count` of its chunks is 0; see
        `core.domain.knowledge.KnowledgeSearch.search`)."""
        changes = self.changes
        if await count() == 0:
            self.saw_empty(changes)
            return None
        return []


class VectorStore(KnowledgeBase, Protocol):
    """A store's knowledge base with what hybrid retrieval reads of it (both stores')."""

    memo: EmptyMemo

    async def vector_version(self, model: str) -> tuple[int, int]:
        """How many vectors `model` made, and the highest chunk id among them."""
        ...

    async def vectors(self, model: str, *, after: int, limit: int) -> list[VectorRow]:
        """Up to `limit` of `model`'s vectors of chunks after chunk id `after`, in id order."""
        ...

    async def passages(self, ids: Sequence[int]) -> list[Passage]:
        """The passages of these chunk ids that are still stored, score 0, in any order."""
        ...
