"""What kind of document a file is, and the text of a plain-text one.

Invariants: the format is decided by the bytes first (a PDF named "notes.txt" is read
as a PDF), by the declared name and MIME type only when the bytes do not say; the caller
has checked the byte limit (`media.intake.Intake.check_size`). A document with no text
is refused (NO_TEXT). Plain text needs no parser; PDF and DOCX parsing costs time and
memory a hostile file can inflate, so their parsers (`media.parsers`) are loaded and run
in a reader process (`media.reader_process`) only: this module, which the bot process
imports, imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from core.domain.errors import AttachmentProblem, AttachmentRefused
from media.kinds import DOCX_MIME, PDF_MIME, mime_type
from media.sniff import looks_like_text, sniff
from media.text import decode_text

SUPPORTED_DOCUMENTS = "text, Markdown, CSV, JSON, source code, PDF, DOCX"
"""The document kinds read, in words an edge can quote to the user."""


HTML_SUFFIXES = (".html", ".htm")
HTML_MIME = "text/html"


@dataclass(frozen=True, slots=True)
class Extracted:
    """A document's text; `complete` is False when reading stopped at a cap first.

    Read with its outline (for the knowledge base), headings are Markdown heading lines
    (HTML's h1–h6, DOCX's heading styles), `pages` the (offset in `text`, 1-based page)
    where each page with text starts (PDF), and `title` the one the document declares
    (HTML's <title>, a PDF's metadata; empty when none)."""

    text: str
    complete: bool = True
    pages: tuple[tuple[int, int], ...] = ()
    title: str = ""


def is_html(name: str, mime: str | None) -> bool:
    """Named or declared HTML (its bytes are text: `document_format` says "text")."""
    return PurePath(name).suffix.lower() in HTML_SUFFIXES or mime_type(mime) == HTML_MIME


def read_text(data: bytes, *, name: str) -> Extracted:
    """The text of the plain-text document `data`; raises `AttachmentRefused` (NO_TEXT)."""
    return with_text(Extracted(decode_text(data)), "file", name=name)


def with_text(found: Extracted, kind: str, *, name: str) -> Extracted:
    """`found`, unless it holds no text: then `AttachmentRefused` (NO_TEXT)."""
    if not found.text.strip():
        raise AttachmentRefused(
            AttachmentProblem.NO_TEXT, f"no text in the {kind}", name=name or None
        )
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
