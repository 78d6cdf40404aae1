"""The operator's knowledge base as the engine sees it: documents cut into passages, and the
port that finds the passages a consultation should read.

Invariants:
- a document is known by its source (a path or an upload name) and the hash of its content:
  adding an unchanged source again changes nothing, a changed one replaces every passage;
- a passage keeps where it came from: its document's title, the heading path above it
  (`Warranty terms › Kettles`, empty when the text has no headings) and, for a PDF, its
  1-based page; shown, a heading path's first heading is left out when it is the title;
- a document tagged with a role serves only that role's consultations; an untagged one
  serves every role;
- a chunk's vector (`core.domain.embeddings`), when it has one, is stored, replaced and
  removed with it;
- `KnowledgeSearch.search` returns at most `limit` passages, best first, each with a
  score where higher is better (comparable only within one answer), and None (not an
  empty list) only when the knowledge base is empty.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from core.domain.embeddings import Embedded

SECTION_SEPARATOR = " › "
"""Joins a passage's heading path: `Warranty terms › Kettles`."""


@dataclass(frozen=True, slots=True)
class KnowledgeDocument:
    """One document of the knowledge base, as listed."""

    id: int
    title: str
    source: str
    role: str | None
    content_hash: str
    chunks: int
    added_at: float


@dataclass(frozen=True, slots=True)
class Chunk:
    """A passage about to be stored: its place in the document and its text."""

    position: int
    section: str
    page: int | None
    text: str


@dataclass(frozen=True, slots=True)
class Passage:
    """A passage found for a query: what a model call is given and a citation names."""

    chunk_id: int
    document_id: int
    title: str
    section: str
    page: int | None
    text: str
    score: float

    @property
    def heading_path(self) -> str:
        """`section` as shown under the title: without its first heading when that heading
        is the document's title (a document titled by its one top heading keeps it in
        every passage's path, where search reads it)."""
        return shown_section(self.title, self.section)

    @property
    def place(self) -> str:
        """Where the passage is, on one line: `Warranty terms › Kettles`."""
        return SECTION_SEPARATOR.join(part for part in (self.title, self.heading_path) if part)


def shown_section(title: str, section: str) -> str:
    """`section` without a first heading that repeats `title` (see `Passage.heading_path`)."""
    first, _, rest = section.partition(SECTION_SEPARATOR)
    return rest if title and first == title else section


class KnowledgeSearch(Protocol):
    async def search(self, query: str, *, role: str | None, limit: int) -> list[Passage] | None:
        """The passages that best match `query` among the documents serving `role`
        (untagged documents serve every role; `None` is a consultation with no role);
        None when the knowledge base holds no document at all, so a deployment that never
        loaded one is asked exactly what it was asked before it had a knowledge base."""
        ...


@dataclass(frozen=True, slots=True)
class NewDocument:
    """A document about to be stored with its chunks: what identifies it (its source)
    and what tells a changed one (the hash of its bytes, its title, its role)."""

    title: str
    source: str
    role: str | None
    content_hash: str


class Stored(Enum):
    """What storing a document did."""

    ADDED = "added"
    REPLACED = "replaced"  # its source was stored before, with other content, title or role
    UNCHANGED = "unchanged"  # the same source, content, title and role: nothing written


class KnowledgeBase(KnowledgeSearch, Protocol):
    """The knowledge base as its operator changes it: documents stored whole or not at all."""

    async def put(
        self,
        document: NewDocument,
        chunks: Sequence[Chunk],
        *,
        at: float,
        again: bool = False,
        vectors: Embedded | None = None,
    ) -> tuple[KnowledgeDocument, Stored]:
        """Store `document` with `chunks` (and each chunk's vector of `vectors`, one per
        chunk in order) in one transaction, replacing every chunk of the document stored
        under the same source, and their vectors; nothing when it is unchanged, unless
        `again` (its chunks cut anew: REPLACED)."""
        ...

    async def document(self, source: str) -> KnowledgeDocument | None:
        """The document stored under `source`, if any."""
        ...

    async def documents(self) -> list[KnowledgeDocument]:
        """Every document, oldest first."""
        ...

    async def remove(self, ids: Sequence[int]) -> list[int]:
        """Delete these documents with their chunks; the ids that were there."""
        ...

    async def count(self) -> int:
        """How many chunks are stored, across documents."""
        ...
