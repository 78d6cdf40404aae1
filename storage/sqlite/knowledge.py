"""The knowledge base on SQLite: documents, their chunks, and FTS5 search over them.

Invariants:
- a document and its chunks are written in one transaction on the store's writer
  (`storage.sqlite.batch`): a reader sees the old version or the new one, never a mix,
  and a failed write leaves the old one whole;
- the search index (`knowledge_search`, FTS5 over `knowledge_chunks.section` and `text`
  by rowid, tokenizer `unicode61 remove_diacritics 2` with letters, marks, digits and
  private-use characters as word characters) is kept by triggers on every insert and
  delete of a chunk, so it never lists a chunk that is gone;
- a query reaches FTS5 only as quoted terms joined by OR (`core.domain.search_terms`):
  whatever the user typed is searched for as words, never read as query syntax;
- a search's candidates are the chunks holding one of the query's rarest words
  (`core.domain.search_terms.candidate_terms`, by how many chunks hold each word:
  `knowledge_words`): bm25 weighs common words next to nothing, and matching every
  chunk by "the" would make a search read them all; a query none of whose words any
  chunk holds reads no chunk;
  ranking is bm25 with a heading path counting twice its text; scores are its
  negation, so higher is better;
- a chunk's vector (`knowledge_vectors`) is written in its chunk's transaction and
  deleted with it (ON DELETE CASCADE): a search never finds a vector without its text.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import unicodedata
from collections.abc import Sequence

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
from storage.sqlite.batch import BatchedConnection
from storage.sqlite.placeholders import sqlite_sql
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

SECTION_WEIGHT = 2.0
TEXT_WEIGHT = 1.0
_RANK = f"bm25(knowledge_search, {SECTION_WEIGHT}, {TEXT_WEIGHT})"
_SEARCH = (
    f"SELECT c.id, c.document_id, d.title, c.section, c.page, c.text, -{_RANK}"
    " FROM knowledge_search"
    " JOIN knowledge_chunks c ON c.id = knowledge_search.rowid"
    " JOIN knowledge_documents d ON d.id = c.document_id"
    " WHERE knowledge_search MATCH ?1 AND (d.role IS NULL OR d.role = ?2)"
    f" ORDER BY {_RANK}, c.id LIMIT ?3"
)


def without_marks(term: str) -> str:
    """`term` without its combining marks (`café` → `cafe`), as the index's tokenizer
    (`remove_diacritics 2`) keeps Latin words: the vocabulary lists them so."""
    decomposed = unicodedata.normalize("NFD", term)
    return unicodedata.normalize(
        "NFC", "".join(c for c in decomposed if not unicodedata.combining(c))
    )


def fts_query(terms: Sequence[str]) -> str:
    """FTS5 query text matching any of `terms`, each a quoted string (a phrase when the
    tokenizer reads more than one word in it). Terms hold no quote (`search_terms`)."""
    return " OR ".join(f'"{term}"' for term in terms)


class SqliteKnowledge:
    """`core.domain.knowledge.KnowledgeBase` on the store's reader and writer connections."""

    def __init__(
        self, reader: BatchedConnection, writer: BatchedConnection, memo: EmptyMemo | None = None
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.memo = memo or EmptyMemo()
        """When the knowledge base was last seen empty (a test gives it a clock of its own)."""

    async def search(self, query: str, *, role: str | None, limit: int) -> list[Passage] | None:
        async def run(terms: list[str]) -> tuple[list[Passage], bool]:
            return await self._reader.run(
                functools.partial(_search, terms=terms, role=role, limit=limit)
            )

        return await self.memo.search(lambda: search_terms(query), limit, self.count, run)

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
        return await self._writer.run(
            functools.partial(
                _put, document=document, chunks=chunks, at=at, again=again, vectors=rows
            )
        )

    async def document(self, source: str) -> KnowledgeDocument | None:
        return await self._reader.run(functools.partial(_document, source=source))

    async def documents(self) -> list[KnowledgeDocument]:
        return await self._reader.run(_documents)

    async def remove(self, ids: Sequence[int]) -> list[int]:
        self.memo.forget()
        return await self._writer.run(functools.partial(_remove, ids=list(ids)))

    async def count(self) -> int:
        return await self._reader.run(_count)

    async def vector_version(self, model: str) -> tuple[int, int]:
        """How many vectors `model` made, and the highest chunk id among them."""
        return await self._reader.run(functools.partial(_vector_version, model=model))

    async def vectors(self, model: str, *, after: int, limit: int) -> list[VectorRow]:
        """Up to `limit` of `model`'s vectors of chunks after chunk id `after`, in id order."""
        return await self._reader.run(
            functools.partial(_vectors, model=model, after=after, limit=limit)
        )

    async def passages(self, ids: Sequence[int]) -> list[Passage]:
        """The passages of these chunk ids that are still stored, score 0, in any order."""
        return await self._reader.run(functools.partial(_passages, ids=list(ids)))


def _search(
    db: sqlite3.Connection, *, terms: list[str], role: str | None, limit: int
) -> tuple[list[Passage], bool]:
    """The passages found, and whether the knowledge base is empty."""
    total = int(db.execute(sqlite_sql(COUNT_CHUNKS)).fetchone()[0])
    if not total:
        return [], True
    plain = [without_marks(term) for term in terms]  # the index's form of accented words
    asked = sorted(set(terms) | set(plain))
    marks = ", ".join("?" * len(asked))
    vocabulary = dict(
        db.execute(f"SELECT term, doc FROM knowledge_words WHERE term IN ({marks})", asked)
    )
    held = [vocabulary.get(t) or vocabulary.get(p) or 0 for t, p in zip(terms, plain, strict=True)]
    rows: list[sqlite3.Row] = []
    for words in candidate_rounds(terms, held, total):
        rows = db.execute(_SEARCH, (fts_query(words), role, limit)).fetchall()
        if rows:
            break
    found = [
        Passage(int(c), int(d), str(t), str(s), p, str(x), float(score))
        for c, d, t, s, p, x, score in rows
    ]
    return found, False


def _document(db: sqlite3.Connection, *, source: str) -> KnowledgeDocument | None:
    row = db.execute(sqlite_sql(SELECT_DOCUMENT), (source,)).fetchone()
    return None if row is None else document_from_row(row)


def _documents(db: sqlite3.Connection) -> list[KnowledgeDocument]:
    return [document_from_row(row) for row in db.execute(sqlite_sql(SELECT_DOCUMENTS))]


def _count(db: sqlite3.Connection) -> int:
    return int(db.execute(sqlite_sql(COUNT_CHUNKS)).fetchone()[0])


def _vector_version(db: sqlite3.Connection, *, model: str) -> tuple[int, int]:
    count, highest = db.execute(sqlite_sql(VECTOR_VERSION), (model,)).fetchone()
    return int(count), int(highest)


def _vectors(db: sqlite3.Connection, *, model: str, after: int, limit: int) -> list[VectorRow]:
    rows = db.execute(sqlite_sql(VECTOR_ROWS), (model, after, limit)).fetchall()
    return [(int(chunk_id), role, bytes(vector)) for chunk_id, role, vector in rows]


def _passages(db: sqlite3.Connection, *, ids: list[int]) -> list[Passage]:
    rows = db.execute(
        f"{PASSAGE_COLUMNS} WHERE c.id IN (SELECT value FROM json_each(?))", (json.dumps(ids),)
    ).fetchall()
    return [Passage(int(c), int(d), str(t), str(s), p, str(x), 0.0) for c, d, t, s, p, x in rows]


def _put(
    db: sqlite3.Connection,
    *,
    document: NewDocument,
    chunks: Sequence[Chunk],
    at: float,
    again: bool,
    vectors: list[tuple[int, str, bytes]],
) -> tuple[KnowledgeDocument, Stored]:
    stored = _document(db, source=document.source)
    if stored is not None and not again and unchanged(stored, document):
        return stored, Stored.UNCHANGED
    title = storable(document.title)
    if stored is None:
        (document_id,) = db.execute(
            sqlite_sql(INSERT_DOCUMENT),
            (title, document.source, document.role, document.content_hash, at),
        ).fetchone()
    else:
        document_id = stored.id
        db.execute(sqlite_sql(DELETE_CHUNKS), (document_id,))
        db.execute(
            sqlite_sql(UPDATE_DOCUMENT),
            (document_id, title, document.role, document.content_hash, at),
        )
    db.executemany(
        sqlite_sql(INSERT_CHUNK),
        ((document_id, c.position, storable(c.section), c.page, storable(c.text)) for c in chunks),
    )
    db.executemany(sqlite_sql(INSERT_VECTOR), ((document_id, *row) for row in vectors))
    written = KnowledgeDocument(
        int(document_id), title, document.source, document.role, document.content_hash,
        len(chunks), at,
    )  # fmt: skip
    return written, Stored.ADDED if stored is None else Stored.REPLACED


def _remove(db: sqlite3.Connection, *, ids: list[int]) -> list[int]:
    removed = []
    for document_id in ids:
        db.execute(sqlite_sql(DELETE_CHUNKS), (document_id,))
        if db.execute(sqlite_sql(DELETE_DOCUMENT), (document_id,)).fetchone() is not None:
            removed.append(document_id)
    return removed
