"""The text of a document: plain text of any kind, a PDF's text layer, a DOCX's words.

Invariants: the format is decided by the bytes first (a PDF named "notes.txt" is read
as a PDF), by the declared name and MIME type only when the bytes do not say; the caller
has checked the byte limit (`media.intake.Intake.check_size`); a DOCX (a ZIP) is parsed
only when its parts unpack to at most `unpacked_limit` bytes, and then as a stream
(`media.docx_text`). A PDF is read page by page up to `MAX_PDF_PAGES`, a PDF or DOCX
only until more than `max_chars` characters are read: the result says whether the text
is complete. Every failure is an `AttachmentRefused` naming the file; running out of
memory is not a failure of the file's but a `MemoryError` the caller handles. PDF and
DOCX parsing costs time and memory a hostile file can inflate: it runs in a reader
process (`media.reader_process`), never in the bot's.
"""

from __future__ import annotations

import io
import logging
import zipfile
from dataclasses import dataclass
from pathlib import PurePath

import pypdf
from lxml import etree

from core.errors import AttachmentProblem, AttachmentRefused
from media.docx_text import docx_body_text
from media.kinds import DOCX_MIME, PDF_MIME, mime_type
from media.sniff import DOCX_MAIN_PART, looks_like_text, sniff
from media.text import decode_text

log = logging.getLogger(__name__)

SUPPORTED_DOCUMENTS = "text, Markdown, CSV, JSON, source code, PDF, DOCX"
"""The document kinds read, in words an edge can quote to the user."""

MAX_UNPACKED_BYTES = 200_000_000
UNPACK_RATIO = 20  # a DOCX may unpack to 20 times the document byte limit, at most


def unpacked_limit(max_document_bytes: int) -> int:
    """How many bytes a DOCX's parts may unpack to, in total."""
    return min(UNPACK_RATIO * max_document_bytes, MAX_UNPACKED_BYTES)


MAX_PDF_PAGES = 500


@dataclass(frozen=True, slots=True)
class Extracted:
    """A document's text; `complete` is False when reading stopped at a cap first."""

    text: str
    complete: bool = True


def read_document(
    data: bytes, *, name: str, mime: str | None, max_bytes: int, max_chars: int
) -> Extracted:
    """The text of the document `data`, which is at most `max_bytes` long (the document
    byte limit, which also bounds a DOCX's unpacked size); a PDF or DOCX is read until
    more than `max_chars` characters are read. Raises `AttachmentRefused` (UNSUPPORTED,
    UNREADABLE, NO_TEXT)."""
    label = name or None
    kind = document_format(data, name=name, mime=mime)
    if kind == "pdf":
        found = _pdf_text(data, label, max_chars)
    elif kind == "docx":
        found = _docx_text(data, label, unpacked_limit(max_bytes), max_chars)
    else:
        found = Extracted(decode_text(data))
    if not found.text.strip():
        raise AttachmentRefused(AttachmentProblem.NO_TEXT, f"no text in the {kind}", name=label)
    return found


def document_format(data: bytes, *, name: str, mime: str | None) -> str:
    """ "pdf", "docx" or "text"; raises `AttachmentRefused` (UNSUPPORTED, or UNREADABLE
    for a file declared a PDF or DOCX whose bytes are not one)."""
    found = sniff(data)
    if found in ("pdf", "docx"):
        return found
    suffix = PurePath(name).suffix.lower()
    declared = mime_type(mime)
    if suffix == ".pdf" or declared == PDF_MIME:
        raise AttachmentRefused(AttachmentProblem.UNREADABLE, "not a PDF inside", name=name)
    if suffix == ".docx" or declared == DOCX_MIME:
        raise AttachmentRefused(AttachmentProblem.UNREADABLE, "not a DOCX inside", name=name)
    if found is None and looks_like_text(data):
        return "text"
    raise AttachmentRefused(
        AttachmentProblem.UNSUPPORTED,
        f"{found or 'binary data'}; supported documents: {SUPPORTED_DOCUMENTS}",
        name=name or None,
    )


def _pdf_text(data: bytes, name: str | None, max_chars: int) -> Extracted:
    """The text layer of the pages, pages apart by a blank line."""
    pages: list[str] = []
    chars = 0
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise AttachmentRefused(AttachmentProblem.UNREADABLE, "encrypted PDF", name=name)
        count = len(reader.pages)
        for index in range(count):
            if index == MAX_PDF_PAGES or chars > max_chars:
                return Extracted(_join_pages(pages), complete=False)
            page = (reader.pages[index].extract_text() or "").strip("\n")
            pages.append(page)
            chars += len(page) + 2
    except (AttachmentRefused, MemoryError):
        raise
    except Exception as exc:  # pypdf raises many kinds on a broken or hostile file
        log.info("PDF %r unreadable: %r", name, exc)
        raise AttachmentRefused(
            AttachmentProblem.UNREADABLE, f"PDF: {type(exc).__name__}: {exc}", name=name
        ) from None
    return Extracted(_join_pages(pages))


def _join_pages(pages: list[str]) -> str:
    return "\n\n".join(page for page in pages if page.strip())


def _docx_text(data: bytes, name: str | None, limit: int, max_chars: int) -> Extracted:
    """Paragraphs and table rows in document order; a row's cells apart by " | "."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(member.file_size for member in archive.infolist())
            if unpacked > limit:
                raise AttachmentRefused(
                    AttachmentProblem.UNREADABLE,
                    f"DOCX unpacks to {unpacked} bytes, over {limit}",
                    name=name,
                )
            with archive.open(DOCX_MAIN_PART) as part:
                text, complete = docx_body_text(part, max_chars=max_chars)
    except (AttachmentRefused, MemoryError):
        raise
    except (zipfile.BadZipFile, KeyError, OSError, ValueError, etree.LxmlError) as exc:
        log.info("DOCX %r unreadable: %r", name, exc)
        raise AttachmentRefused(
            AttachmentProblem.UNREADABLE, f"DOCX: {type(exc).__name__}: {exc}", name=name
        ) from None
    return Extracted(text, complete)
