"""The operator's files loaded into the knowledge base: found in folders, read by the
document readers, cut into chunks and stored whole.

Invariants:
- a file is read only when its size is within `max_bytes` and its bytes changed since it
  was stored (the SHA-256 of its bytes, its title and role): an unchanged file costs a
  hash and one read of its row, and says so;
- PDF, DOCX and HTML are parsed by the reader processes (`media.reader_pool`, their
  deadline and memory limit), plain text and Markdown on their threads;
- each file ends in one `Loaded`: stored (added, replaced or unchanged, with a note when
  only part of it was read) or refused with the reason, naming the file; a file that
  fails changes nothing stored, and the files after it are still loaded;
- an upload (the web console's, an operator's Telegram document) is loaded the same way
  from its bytes, under a source of its own (`upload_source`) that no path can take, so
  uploading a file again replaces it and an unchanged one costs nothing;
- with an embedder, every chunk is embedded before anything is stored, and its vector is
  stored with it in the same transaction; a document the embedder fails is refused
  whole (its old version stays), and the files after it are still loaded;
- the text is material, never an instruction: it is stored as read, whatever it says.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from core.domain.embeddings import Embedded, Embedder, EmbeddingFailed
from core.domain.errors import AttachmentProblem, AttachmentRefused
from core.domain.knowledge import Chunk, KnowledgeBase, KnowledgeDocument, NewDocument, Stored
from media.reader_pool import DocumentReaders, ReadersClosed

SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx")
"""The files a folder is searched for, and the only ones loaded."""
_OUTLINED = (".md", ".markdown", ".html", ".htm", ".docx")
"""Files whose headings are read: Markdown, and what the readers write as Markdown."""


MAX_NAME_CHARS = 200
UPLOAD_SCHEME = "upload:"
"""Begins the source of an uploaded document: `upload:price-list.pdf`."""


def upload_source(name: str) -> str:
    """The source an uploaded file named `name` is stored under: its base name alone
    (a name may arrive with a client's folders or with separators of another system)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    printable = "".join(c for c in base if c.isprintable()).strip(" .")[:MAX_NAME_CHARS]
    return UPLOAD_SCHEME + (printable or "document")


def is_upload(source: str) -> bool:
    """Whether a stored document came from an upload (it has no file to read again)."""
    return source.startswith(UPLOAD_SCHEME)


@dataclass(frozen=True, slots=True)
class Loaded:
    """What loading one file did: `stored` and `document`, or the `problem` that kept it
    out (and its kind, `refusal`, where it is one an edge words for its reader: too large,
    of another kind, unreadable, too costly, no text); `note` says when only part of its
    text was read. `source` names the file: its path, or the upload's source."""

    source: str
    document: KnowledgeDocument | None = None
    stored: Stored | None = None
    problem: str = ""
    note: str = ""
    refusal: AttachmentProblem | None = None


def files_in(paths: Iterable[Path]) -> tuple[list[Path], list[Loaded]]:
    """The files named and those under the folders named (recursively, hidden ones and
    other kinds passed over), each once, in order; and a `Loaded` problem for each path
    that is neither, or a named file of a kind not loaded."""
    found: dict[Path, None] = {}
    problems: list[Loaded] = []
    for path in paths:
        if path.is_dir():
            for root, folders, names in os.walk(path):
                folders[:] = sorted(f for f in folders if not f.startswith("."))
                for name in sorted(names):
                    if not name.startswith(".") and name.lower().endswith(SUFFIXES):
                        found.setdefault(Path(root, name).absolute(), None)
        elif path.is_file():
            if path.suffix.lower() in SUFFIXES:
                found.setdefault(path.absolute(), None)
            else:
                kinds = ", ".join(SUFFIXES)
                problems.append(Loaded(str(path), problem=f"not a kind loaded ({kinds})"))
        else:
            problems.append(Loaded(str(path), problem="no such file or folder"))
    return list(found), problems


class KnowledgeLoader:
    """Loads files into one knowledge base through one pool of document readers."""

    def __init__(
        self,
        knowledge: KnowledgeBase,
        readers: DocumentReaders,
        *,
        max_bytes: int,
        embedder: Embedder | None = None,
    ) -> None:
        self._knowledge = knowledge
        self._readers = readers
        self._max_bytes = max_bytes
        self._embedder = embedder

    async def load(
        self, path: Path, *, title: str = "", role: str | None = None, again: bool = False
    ) -> Loaded:
        """Store the file at `path` (an absolute path: its source) as one document titled
        `title` (else the title it declares, else the heading over all its text, else its
        file name), for `role`'s
        consultations (None: every one's); `again` cuts an unchanged one anew."""
        try:
            data = await asyncio.to_thread(_bytes_of, path, self._max_bytes)
        except OSError as error:
            return Loaded(str(path), problem=f"cannot be read: {error.strerror or error}")
        except _TooLarge as large:
            return Loaded(
                str(path),
                problem=_too_large(large.size, self._max_bytes),
                refusal=AttachmentProblem.TOO_LARGE,
            )
        return await self.load_bytes(
            data, name=path.name, source=str(path), title=title, role=role, again=again
        )

    async def load_upload(
        self, data: bytes, *, name: str, title: str = "", role: str | None = None
    ) -> Loaded:
        """Store an uploaded file named `name` (`upload_source`), as `load` stores a
        file; a name of a kind not loaded is refused before anything is read."""
        source = upload_source(name)
        if not source.lower().endswith(SUFFIXES):
            return Loaded(
                source,
                problem=f"not a kind loaded ({', '.join(SUFFIXES)})",
                refusal=AttachmentProblem.UNSUPPORTED,
            )
        if len(data) > self._max_bytes:
            return Loaded(
                source,
                problem=_too_large(len(data), self._max_bytes),
                refusal=AttachmentProblem.TOO_LARGE,
            )
        base = source.removeprefix(UPLOAD_SCHEME)
        return await self.load_bytes(data, name=base, source=source, title=title, role=role)

    async def load_bytes(
        self,
        data: bytes,
        *,
        name: str,
        source: str,
        title: str = "",
        role: str | None = None,
        again: bool = False,
    ) -> Loaded:
        """Store `data`, a file named `name`, as the document of `source`."""
        digest = hashlib.sha256(data).hexdigest()
        stored = await self._knowledge.document(source)
        if (
            not again
            and stored is not None
            and stored.content_hash == digest
            and stored.role == role
            and (not title or stored.title == title)
        ):
            return Loaded(source, stored, Stored.UNCHANGED)
        try:
            read = await self._readers.read(
                data,
                name=name,
                mime=None,
                max_bytes=self._max_bytes,
                max_chars=self._max_bytes,
                outline=True,
            )
        except AttachmentRefused as refused:
            return Loaded(
                source, problem=refused.detail or refused.problem.value, refusal=refused.problem
            )
        except ReadersClosed:
            raise
        suffix = Path(name).suffix.lower()
        from core.domain.chunking import (  # the splitter: with the first document
            chunk_text,
            top_heading,
        )

        chunks = await asyncio.to_thread(
            chunk_text, read.text, outline=suffix in _OUTLINED, pages=read.pages
        )
        if not chunks:
            return Loaded(source, problem="no text", refusal=AttachmentProblem.NO_TEXT)
        vectors = None
        if self._embedder is not None:
            try:
                embedded = await self._embedder.embed([embedding_text(c) for c in chunks])
            except EmbeddingFailed as failed:
                return Loaded(source, problem=f"not embedded ({failed.reason}); nothing stored")
            vectors = Embedded(self._embedder.model, embedded)
        named = title or (stored.title if stored and again else "") or read.title
        heading = top_heading(chunks)
        if heading and not named:  # titled by the heading over all its text
            named = heading
        named = named or Path(name).stem
        document = NewDocument(named, source, role, digest)
        written, outcome = await self._knowledge.put(
            document, chunks, at=time.time(), again=again, vectors=vectors
        )
        note = "" if read.complete else f"only the first {len(read.text):,} characters were read"
        return Loaded(source, written, outcome, note=note)


def embedding_text(chunk: Chunk) -> str:
    """What a chunk's vector is made of: its heading path, then its text (a passage under
    "Kettles" is about kettles even when its text does not say so)."""
    return f"{chunk.section}\n\n{chunk.text}" if chunk.section else chunk.text


class _TooLarge(Exception):
    def __init__(self, size: int) -> None:
        self.size = size


def _bytes_of(path: Path, limit: int) -> bytes:
    """The file's bytes; `_TooLarge` past `limit`, never reading more than one byte over
    it (a file may grow after its size was looked at)."""
    size = path.stat().st_size
    if size > limit:
        raise _TooLarge(size)
    with path.open("rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise _TooLarge(len(data))
    return data


def _too_large(size: int, limit: int) -> str:
    return (
        f"{size / 1e6:.1f} MB, over KNOWLEDGE_MAX_DOCUMENT_BYTES ({limit / 1e6:g} MB);"
        " split it or raise the limit"
    )
