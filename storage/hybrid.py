"""Hybrid retrieval: the store's full-text search and an exact vector search over the
chunks' stored vectors, fused by reciprocal rank fusion.

Invariants:
- a search embeds its query once (the turn's knowledge query) and asks the text search
  and the vector index for `CANDIDATES` times the passages wanted each, then fuses the two
  rankings (`core.domain.rank_fusion`): a passage's score is its fused score;
- a chunk without a vector of the configured model (loaded before embeddings were on,
  or by another model) is ranked by its words alone: it is in the text ranking only;
- an embeddings failure or a query embedding slower than `query_seconds` fails no search:
  it is answered by full text, and one warning line says so; an empty knowledge base
  (the text search's None) and a blank query are answered without an embeddings request;
- the index (`storage.vector_index`) is loaded on the first search, again at once after
  this process changed the knowledge base (the store's `EmptyMemo.changes`), and again
  within `check_seconds` after another process did (one cheap version query per
  `check_seconds`, at most); one load at a time, its pages read from the store and
  turned into the matrix on a worker thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence

from core.domain.embeddings import VECTOR_ITEM_BYTES, Embedded, Embedder, EmbeddingFailed
from core.domain.knowledge import (
    Chunk,
    KnowledgeDocument,
    NewDocument,
    Passage,
    Stored,
)
from core.domain.rank_fusion import fuse
from storage.knowledge import VectorStore
from storage.vector_index import IndexBuilder, VectorIndex

log = logging.getLogger(__name__)

CANDIDATES = 4
"""Each ranking is asked for this many times the passages wanted."""
CHECK_SECONDS = 2.0
"""How stale the index may be after another process changed the knowledge base."""
QUERY_SECONDS = 5.0
"""How long a search waits for its query's embedding before it answers by full text."""
PAGE_ROWS = 4096
"""Vectors read in one query while the index loads."""


class HybridKnowledge:
    """`core.domain.knowledge.KnowledgeBase` over a store's, searching by words and meaning."""

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        *,
        query_seconds: float = QUERY_SECONDS,
        check_seconds: float = CHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._query_seconds = query_seconds
        self._check_seconds = check_seconds
        self._clock = clock
        self._index: VectorIndex | None = None
        self._version: tuple[int, int] | None = None
        self._changes = -1  # the store's memo.changes the index was loaded at
        self._checked_at = float("-inf")
        self._loading = asyncio.Lock()
        self.loads = 0
        """How many times the index was loaded (tests read it)."""

    @property
    def model(self) -> str:
        return self._embedder.model

    async def search(self, query: str, *, role: str | None, limit: int) -> list[Passage] | None:
        if self._store.memo.known_empty() or limit <= 0:
            return await self._store.search(query, role=role, limit=limit)
        wanted = limit * CANDIDATES
        # Words first (milliseconds): an empty knowledge base costs no embeddings request.
        text = await self._store.search(query, role=role, limit=wanted)
        if text is None:
            return None
        vector = await self._embed_query(query) if query.strip() else None
        if vector is None:
            return text[:limit]
        index = await self._current_index(len(vector) // VECTOR_ITEM_BYTES)
        nearest = await asyncio.to_thread(index.nearest, vector, role=role, limit=wanted)
        fused = fuse([p.chunk_id for p in text], nearest, limit=limit)
        known = {p.chunk_id: p for p in text}
        missing = [chunk_id for chunk_id, _ in fused if chunk_id not in known]
        if missing:
            known.update((p.chunk_id, p) for p in await self._store.passages(missing))
        return [
            _scored(known[chunk_id], score) for chunk_id, score in fused if chunk_id in known
        ]  # a chunk removed since the index was loaded is left out

    async def _embed_query(self, query: str) -> bytes | None:
        """The query's vector; None (logged) when the provider failed or was too slow."""
        try:
            async with asyncio.timeout(self._query_seconds):
                (vector,) = await self._embedder.embed([query])
        except TimeoutError:
            log.warning(
                "knowledge search by full text only: no query embedding within %gs",
                self._query_seconds,
            )
            return None
        except EmbeddingFailed as failed:
            log.warning("knowledge search by full text only: embeddings: %s", failed.reason)
            return None
        return vector

    async def _current_index(self, dimensions: int) -> VectorIndex:
        """The index of the configured model's vectors of `dimensions`, reloaded when
        stale (see the module)."""
        async with self._loading:
            changes = self._store.memo.changes
            index = self._index
            fresh = (
                index is not None and index.dimensions == dimensions and changes == self._changes
            )
            if fresh and self._clock() - self._checked_at < self._check_seconds:
                assert index is not None
                return index
            version = await self._store.vector_version(self.model)
            self._checked_at = self._clock()
            if fresh and version == self._version:
                assert index is not None
                return index
            index = await self._load(dimensions, version[0])
            self._index, self._version, self._changes = index, version, changes
            return index

    async def _load(self, dimensions: int, expected: int) -> VectorIndex:
        self.loads += 1
        started = time.perf_counter()
        builder = IndexBuilder(dimensions, expected)
        after = 0
        while rows := await self._store.vectors(self.model, after=after, limit=PAGE_ROWS):
            await asyncio.to_thread(builder.add, rows)
            after = rows[-1][0]
        index = builder.finish()
        log.info(
            "knowledge vectors of %s loaded: %d chunks of %d dimensions (%d skipped) in %.2fs",
            self.model, len(index), dimensions, index.skipped, time.perf_counter() - started,
        )  # fmt: skip
        if index.skipped:
            log.warning(
                "%d stored vectors of %s are not of %d dimensions or not usable: run"
                " `consultation-bot knowledge reindex`",
                index.skipped, self.model, dimensions,
            )  # fmt: skip
        return index

    # -- the rest of the knowledge base is the store's -----------------------------------

    async def put(
        self,
        document: NewDocument,
        chunks: Sequence[Chunk],
        *,
        at: float,
        again: bool = False,
        vectors: Embedded | None = None,
    ) -> tuple[KnowledgeDocument, Stored]:
        return await self._store.put(document, chunks, at=at, again=again, vectors=vectors)

    async def document(self, source: str) -> KnowledgeDocument | None:
        return await self._store.document(source)

    async def documents(self) -> list[KnowledgeDocument]:
        return await self._store.documents()

    async def remove(self, ids: Sequence[int]) -> list[int]:
        return await self._store.remove(ids)

    async def count(self) -> int:
        return await self._store.count()


def _scored(passage: Passage, score: float) -> Passage:
    return dataclasses.replace(passage, score=score)
