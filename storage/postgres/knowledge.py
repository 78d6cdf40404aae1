"""The knowledge base on PostgreSQL: documents, their chunks, and full-text search over them.

Invariants:
- a document and its chunks are written in one transaction: a reader sees the old
  version or the new one, never a mix, and a failed write leaves the old one whole;
- search reads the GIN index over `storage.postgres.schema.KNOWLEDGE_VECTOR` (the
  `simple` configuration, a chunk's heading path weighted A) and ranks by the rarity of
  the query words a chunk holds, then by ts_rank_cd (a heading path counting twice its
  text, divided by 1 + the log of the chunk's length; `_SEARCH`);
- a query reaches PostgreSQL only as terms (`core.domain.search_terms`) joined by `or`
  through `websearch_to_tsquery`, which never fails on its input: whatever the user
  typed is searched for as words, never read as query syntax.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

import asyncpg

from core.domain.knowledge import Chunk, KnowledgeDocument, NewDocument, Passage, Stored
from core.domain.search_terms import search_terms
from storage.knowledge import EmptyMemo, document_from_row, storable, unchanged
from storage.postgres.schema import KNOWLEDGE_VECTOR
from storage.statements.knowledge import (
    ANY_CHUNK,
    COUNT_CHUNKS,
    DELETE_CHUNKS,
    DELETE_DOCUMENT,
    INSERT_CHUNK,
    INSERT_DOCUMENT,
    SELECT_DOCUMENT,
    SELECT_DOCUMENTS,
    UPDATE_DOCUMENT,
)

T = TypeVar("T")

SECTION_WEIGHT = 1.0  # weight A
TEXT_WEIGHT = 0.5  # weight D, the unweighted words'
_WEIGHTS = f"'{{{TEXT_WEIGHT}, {TEXT_WEIGHT}, {TEXT_WEIGHT}, {SECTION_WEIGHT}}}'::real[]"
_SEARCH = (
    "WITH total AS (SELECT COUNT(*) AS n FROM knowledge_chunks),"
    " terms AS (SELECT plainto_tsquery('simple', t) AS q,"
    " GREATEST(ln((total.n - m.df + 0.5) / (m.df + 0.5)), 1e-6)::float8 AS idf"
    " FROM unnest($1::text[]) AS t, total, LATERAL (SELECT COUNT(*) AS df FROM"
    f" (SELECT 1 FROM knowledge_chunks WHERE {KNOWLEDGE_VECTOR} @@ plainto_tsquery('simple', t)"
    " LIMIT total.n / 2 + 1) AS found) AS m),"
    " whole AS (SELECT websearch_to_tsquery('simple', $2) AS q)"
    " SELECT c.id, c.document_id, d.title, c.section, c.page, c.text,"
    " (SELECT COALESCE(SUM(terms.idf), 0) FROM terms WHERE x.v @@ terms.q)"
    f" + ts_rank_cd({_WEIGHTS}, x.v, whole.q, 1) AS score"
    " FROM whole, knowledge_chunks c JOIN knowledge_documents d ON d.id = c.document_id"
    f" CROSS JOIN LATERAL (SELECT {KNOWLEDGE_VECTOR} AS v) AS x"
    f" WHERE {KNOWLEDGE_VECTOR} @@ whole.q AND (d.role IS NULL OR d.role = $3)"
    " ORDER BY score DESC, c.id LIMIT $4"
)
"""Every chunk holding a query word, ranked by how rare the words it holds are (the sum
of their inverse document frequencies as SQLite's bm25 computes them, next to nothing for
a word in half of the chunks or more: ts_rank_cd alone weighs each word alike, and "is"
and "the" would outrank the one word that matters), then by ts_rank_cd over all of
them. A word's chunks are counted through the index, only up to one more than half of
the chunks: past that, its weight is next to nothing anyway."""


class Run(Protocol):
    """How the store runs work on a connection of its pool (`storage.postgres.calls`)."""

    async def __call__(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T: ...


def tsquery_text(terms: Sequence[str]) -> str:
    """`websearch_to_tsquery` text matching any of `terms`; the word "or" is its operator,
    so it is no term."""
    return " or ".join(term for term in terms if term != "or")


def _passage(row: asyncpg.Record) -> Passage:
    return Passage(
        int(row["id"]), int(row["document_id"]), row["title"], row["section"], row["page"],
        row["text"], float(row["score"]),
    )  # fmt: skip


class PostgresKnowledge:
    """`core.domain.knowledge.KnowledgeBase` through the store's calls on its pool."""

    def __init__(self, call: Run, write: Run, memo: EmptyMemo | None = None) -> None:
        self._call = call
        self._write = write
        self.memo = memo or EmptyMemo()
        """When the knowledge base was last seen empty (a test gives it a clock of its own)."""

    async def search(self, query: str, *, role: str | None, limit: int) -> list[Passage]:
        if limit <= 0 or self.memo.known_empty():
            return []
        terms = [term for term in search_terms(query) if term != "or"]
        if not terms:
            return []
        changes = self.memo.changes

        async def work(connection: asyncpg.Connection) -> tuple[list[Passage], bool]:
            rows = await connection.fetch(_SEARCH, terms, tsquery_text(terms), role, limit)
            found = [_passage(row) for row in rows]
            return found, not found and await connection.fetchval(ANY_CHUNK) is None

        found, empty = await self._call(work)
        if empty:
            self.memo.saw_empty(changes)
        return found

    async def put(
        self, document: NewDocument, chunks: Sequence[Chunk], *, at: float, again: bool = False
    ) -> tuple[KnowledgeDocument, Stored]:
        self.memo.forget()

        async def work(connection: asyncpg.Connection) -> tuple[KnowledgeDocument, Stored]:
            # Two writers of one source take turns: the second sees the first's row.
            await connection.execute(
                "SELECT pg_advisory_xact_lock(hashtext('knowledge:' || $1))", document.source
            )
            row = await connection.fetchrow(SELECT_DOCUMENT, document.source)
            stored = None if row is None else document_from_row(tuple(row))
            if stored is not None and not again and unchanged(stored, document):
                return stored, Stored.UNCHANGED
            title = storable(document.title)
            values = (title, document.role, document.content_hash, at)
            if stored is None:
                document_id = await connection.fetchval(
                    INSERT_DOCUMENT, title, document.source, document.role,
                    document.content_hash, at,
                )  # fmt: skip
            else:
                document_id = stored.id
                await connection.execute(DELETE_CHUNKS, document_id)
                await connection.execute(UPDATE_DOCUMENT, document_id, *values)
            await connection.executemany(
                INSERT_CHUNK,
                [
                    (document_id, c.position, storable(c.section), c.page, storable(c.text))
                    for c in chunks
                ],
            )
            written = KnowledgeDocument(
                int(document_id), title, document.source, document.role,
                document.content_hash, len(chunks), at,
            )  # fmt: skip
            return written, Stored.ADDED if stored is None else Stored.REPLACED

        return await self._write(work)

    async def document(self, source: str) -> KnowledgeDocument | None:
        row = await self._call(lambda c: c.fetchrow(SELECT_DOCUMENT, source))
        return None if row is None else document_from_row(tuple(row))

    async def documents(self) -> list[KnowledgeDocument]:
        rows = await self._call(lambda c: c.fetch(SELECT_DOCUMENTS))
        return [document_from_row(tuple(row)) for row in rows]

    async def remove(self, ids: Sequence[int]) -> list[int]:
        self.memo.forget()

        async def work(connection: asyncpg.Connection) -> list[int]:
            removed = []
            for document_id in ids:
                await connection.execute(DELETE_CHUNKS, document_id)
                if await connection.fetchval(DELETE_DOCUMENT, document_id) is not None:
                    removed.append(document_id)
            return removed

        return await self._write(work)

    async def count(self) -> int:
        return int(await self._call(lambda c: c.fetchval(COUNT_CHUNKS)))
