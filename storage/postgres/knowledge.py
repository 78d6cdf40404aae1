"""The knowledge base on PostgreSQL: documents, their chunks, and full-text search over them.

Invariants:
- a document and its chunks are written in one transaction: a reader sees the old
  version or the new one, never a mix, and a failed write leaves the old one whole;
- search reads the GIN index over `knowledge_chunks.search` (generated from
  `storage.postgres.schema.KNOWLEDGE_VECTOR`: the `simple` configuration, a chunk's
  heading path weighted A); its candidates are the chunks holding one of the query's
  rarest words (`core.domain.search_terms.candidate_terms`), ranked by the rarity of
  those words a chunk holds, then by ts_rank_cd (a heading path counting twice its
  text, divided by 1 + the log of the chunk's length). How many chunks hold a word
  comes from the statistics ANALYZE keeps (`_WORDS`, `word_counts`), so a search reads
  no chunk but its candidates, however common its words; when the rarest words find
  nothing the role reads, the next rarest are searched, once;
- a query reaches PostgreSQL only as terms (`core.domain.search_terms`) joined by `or`
  through `websearch_to_tsquery`, which never fails on its input: whatever the user
  typed is searched for as words, never read as query syntax;
- a chunk's vector (`knowledge_vectors`) is written in its chunk's transaction and
  deleted with it (ON DELETE CASCADE): a search never finds a vector without its text.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

import asyncpg

from core.domain.embeddings import Embedded
from core.domain.knowledge import Chunk, KnowledgeDocument, NewDocument, Passage, Stored
from core.domain.search_terms import candidate_rounds, search_terms
from storage.knowledge import (
    EmptyMemo,
    VectorRow,
    document_from_row,
    storable,
    unchanged,
    vector_rows,
)
from storage.statements.knowledge import (
    COUNT_CHUNKS,
    DELETE_CHUNKS,
    DELETE_DOCUMENT,
    INSERT_CHUNK,
    INSERT_DOCUMENT,
    INSERT_VECTOR,
    PASSAGE_COLUMNS,
    SELECT_DOCUMENT,
    SELECT_DOCUMENTS,
    UPDATE_DOCUMENT,
    VECTOR_ROWS,
    VECTOR_VERSION,
)

T = TypeVar("T")

SECTION_WEIGHT = 1.0  # weight A
TEXT_WEIGHT = 0.5  # weight D, the unweighted words'
_WEIGHTS = f"'{{{TEXT_WEIGHT}, {TEXT_WEIGHT}, {TEXT_WEIGHT}, {SECTION_WEIGHT}}}'::real[]"
_WORDS = (
    "SELECT EXISTS (SELECT 1 FROM knowledge_chunks),"
    " (SELECT reltuples FROM pg_class WHERE oid = 'knowledge_chunks'::regclass),"
    " (SELECT most_common_elems::text::text[] FROM pg_stats WHERE schemaname = current_schema()"
    " AND tablename = 'knowledge_chunks' AND attname = 'search'),"
    " (SELECT most_common_elem_freqs FROM pg_stats WHERE schemaname = current_schema()"
    " AND tablename = 'knowledge_chunks' AND attname = 'search')"
)
"""Whether any chunk is stored, about how many, and the share of chunks holding each of
the commonest words: the statistics ANALYZE keeps (each `put` runs it), read without
touching a chunk."""
_SEARCH = (
    "WITH terms AS MATERIALIZED (SELECT plainto_tsquery('simple', t) AS q, w"
    " FROM unnest($2::text[], $3::float8[]) AS u(t, w))"
    " SELECT c.id, c.document_id, d.title, c.section, c.page, c.text,"
    " (SELECT COALESCE(SUM(terms.w), 0) FROM terms WHERE c.search @@ terms.q)"
    f" + ts_rank_cd({_WEIGHTS}, c.search, websearch_to_tsquery('simple', $1), 1) AS score"
    " FROM knowledge_chunks c JOIN knowledge_documents d ON d.id = c.document_id"
    " WHERE c.search @@ websearch_to_tsquery('simple', $1)"
    " AND (d.role IS NULL OR d.role = $4)"
    " ORDER BY score DESC, c.id LIMIT $5"
)
"""The chunks holding one of the words $1 names (through the index), ranked by the sum
of the weights $3 of the words $2 they hold, then by ts_rank_cd."""


def word_counts(
    terms: Sequence[str], chunks: float, common: Sequence[str], shares: Sequence[float]
) -> list[float]:
    """About how many of the `chunks` hold each of `terms`, by the statistics: the share
    they list for a common word; for a word they do not list, the least share they list
    (every unlisted word is rarer than that), else one chunk. `shares` is
    `most_common_elem_freqs`: one share per listed word, then the least and the largest
    share and the share of empty vectors."""
    share = dict(zip(common, shares, strict=False))
    least = shares[len(common)] if len(shares) > len(common) else 0.0
    unlisted = max(least * chunks, 1.0)
    return [share.get(term, 0.0) * chunks or unlisted for term in terms]


def word_weight(held: float, chunks: float) -> float:
    """A word's weight: its inverse document frequency as SQLite's bm25 computes it, next
    to nothing for a word half of the chunks hold (ts_rank_cd alone weighs each word
    alike, and "is" and "the" would outrank the one word that matters)."""
    return max(math.log((chunks - held + 0.5) / (held + 0.5)), 1e-6)


class Run(Protocol):
    """How the store runs work on a connection of its pool (`storage.postgres.calls`)."""

    async def __call__(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T: ...


def tsquery_text(terms: Sequence[str]) -> str:
    """`websearch_to_tsquery` text matching any of `terms`; the word "or" is its operator,
    so it is no term."""
    return " or ".join(term for term in terms if term != "or")


def _passage(row: asyncpg.Record, score: float | None = None) -> Passage:
    return Passage(
        int(row["id"]), int(row["document_id"]), row["title"], row["section"], row["page"],
        row["text"], float(row["score"]) if score is None else score,
    )  # fmt: skip


async def _search(
    connection: asyncpg.Connection, *, terms: list[str], role: str | None, limit: int
) -> tuple[list[Passage], bool]:
    """The passages found, and whether the knowledge base is empty."""
    any_chunk, chunks, common, shares = await connection.fetchrow(_WORDS)
    if not any_chunk:
        return [], True
    if chunks is None or chunks < 1:  # never analyzed: every word counts alike
        common, shares, chunks = [], [], 1.0
    total = max(chunks, 1.0)
    held = word_counts(terms, total, common or [], shares or [])
    count = dict(zip(terms, held, strict=True))
    rows: list[asyncpg.Record] = []
    for words in candidate_rounds(terms, held, total):
        weights = [word_weight(count[word], total) for word in words]
        rows = await connection.fetch(_SEARCH, tsquery_text(words), words, weights, role, limit)
        if rows:
            break
    return [_passage(row) for row in rows], False


class PostgresKnowledge:
    """`core.domain.knowledge.KnowledgeBase` through the store's calls on its pool."""

    def __init__(self, call: Run, write: Run, memo: EmptyMemo | None = None) -> None:
        self._call = call
        self._write = write
        self.memo = memo or EmptyMemo()
        """When the knowledge base was last seen empty (a test gives it a clock of its own)."""

    async def search(self, query: str, *, role: str | None, limit: int) -> list[Passage] | None:
        def words_of() -> list[str]:
            return [term for term in search_terms(query) if term != "or"]

        async def run(terms: list[str]) -> tuple[list[Passage], bool]:
            return await self._call(functools.partial(_search, terms=terms, role=role, limit=limit))

        return await self.memo.search(words_of, limit, self.count, run)

    async def put(
        self,
        document: NewDocument,
        chunks: Sequence[Chunk],
        *,
        at: float,
        again: bool = False,
        vectors: Embedded | None = None,
    ) -> tuple[KnowledgeDocument, Stored]:
        rows = vector_rows(chunks, vectors)
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
            if rows:
                await connection.executemany(INSERT_VECTOR, [(document_id, *row) for row in rows])
            # Statistics now: the planner reads words through the index only when it knows
            # the table holds more than a few rows.
            await connection.execute("ANALYZE knowledge_chunks")
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
            await connection.execute("ANALYZE knowledge_chunks")
            return removed

        return await self._write(work)

    async def count(self) -> int:
        return int(await self._call(lambda c: c.fetchval(COUNT_CHUNKS)))

    async def vector_version(self, model: str) -> tuple[int, int]:
        """How many vectors `model` made, and the highest chunk id among them."""
        row = await self._call(lambda c: c.fetchrow(VECTOR_VERSION, model))
        return int(row[0]), int(row[1])

    async def vectors(self, model: str, *, after: int, limit: int) -> list[VectorRow]:
        """Up to `limit` of `model`'s vectors of chunks after chunk id `after`, in id order."""
        rows = await self._call(lambda c: c.fetch(VECTOR_ROWS, model, after, limit))
        return [(int(row[0]), row[1], bytes(row[2])) for row in rows]

    async def passages(self, ids: Sequence[int]) -> list[Passage]:
        """The passages of these chunk ids that are still stored, score 0, in any order."""
        wanted = list(ids)
        rows = await self._call(
            lambda c: c.fetch(f"{PASSAGE_COLUMNS} WHERE c.id = ANY($1::bigint[])", wanted)
        )
        return [_passage(row, 0.0) for row in rows]
