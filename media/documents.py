"""The text of a document: plain text of any kind, a PDF's text layer, a DOCX's words.

Invariants: the format is decided by the bytes first (a PDF named "notes.txt" is read
as a PDF), by the declared name and MIME type only when the bytes do not say; the caller
has checked the byte limit (`media.intake.Intake.check_size`); a DOCX (a ZIP) is parsed
only when its parts unpack to at most `unpacked_limit` bytes (ZIP reads stop at the
sizes the archive declares, so the check bounds the memory parsing takes). Every failure
is an `AttachmentRefused` naming the file. The functions here block (a PDF may take
seconds): callers run them in a worker thread.
"""

from __future__ import annotations

import io
import logging
import zipfile
from pathlib import PurePath

import docx
import pypdf
from docx.table import Table
from docx.text.paragraph import Paragraph

from core.errors import AttachmentProblem, AttachmentRefused
from media.kinds import DOCX_MIME, PDF_MIME, mime_type
from media.sniff import looks_like_text, sniff
from media.text import decode_text

log = logging.getLogger(__name__)

SUPPORTED_DOCUMENTS = "text, Markdown, CSV, JSON, source code, PDF, DOCX"
"""The document kinds read, in words an edge can quote to the user."""

MAX_UNPACKED_BYTES = 200_000_000
UNPACK_RATIO = 20  # a DOCX may unpack to 20 times the document byte limit, at most


def unpacked_limit(max_document_bytes: int) -> int:
    """How many bytes a DOCX's parts may unpack to, in total."""
    return min(UNPACK_RATIO * max_document_bytes, MAX_UNPACKED_BYTES)


def read_document(data: bytes, *, name: str, mime: str | None, max_bytes: int) -> str:
    """The text of the document `data`, which is at most `max_bytes` long (the document
    byte limit, which also bounds a DOCX's unpacked size); raises `AttachmentRefused` (UNSUPPORTED,
    UNREADABLE, NO_TEXT)."""
    label = name or None
    kind = document_format(data, name=name, mime=mime)
    if kind == "pdf":
        text = _pdf_text(data, label)
    elif kind == "docx":
        text = _docx_text(data, label, unpacked_limit(max_bytes))
    else:
        text = decode_text(data)
    if not text.strip():
        raise AttachmentRefused(AttachmentProblem.NO_TEXT, f"no text in the {kind}", name=label)
    return text


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


def _pdf_text(data: bytes, name: str | None) -> str:
    """The text layer of every page, pages apart by a blank line."""
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise AttachmentRefused(AttachmentProblem.UNREADABLE, "encrypted PDF", name=name)
        pages = [page.extract_text() or "" for page in reader.pages]
    except AttachmentRefused:
        raise
    except Exception as exc:  # pypdf raises many kinds on a broken or hostile file
        log.info("PDF %r unreadable: %r", name, exc)
        raise AttachmentRefused(
            AttachmentProblem.UNREADABLE, f"PDF: {type(exc).__name__}: {exc}", name=name
        ) from None
    return "\n\n".join(page.strip("\n") for page in pages if page.strip())


def _docx_text(data: bytes, name: str | None, limit: int) -> str:
    """Paragraphs and table rows in document order; a row's cells apart by " | "."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(member.file_size for member in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise AttachmentRefused(AttachmentProblem.UNREADABLE, f"DOCX: {exc}", name=name) from None
    if unpacked > limit:
        raise AttachmentRefused(
            AttachmentProblem.UNREADABLE,
            f"DOCX unpacks to {unpacked} bytes, over {limit}",
            name=name,
        )
    try:
        document = docx.Document(io.BytesIO(data))
        lines: list[str] = []
        for block in document.iter_inner_content():
            if isinstance(block, Paragraph):
                lines.append(block.text)
            elif isinstance(block, Table):
                lines.extend(_table_rows(block))
    except Exception as exc:  # python-docx and lxml raise many kinds on a broken file
        log.info("DOCX %r unreadable: %r", name, exc)
        raise AttachmentRefused(
            AttachmentProblem.UNREADABLE, f"DOCX: {type(exc).__name__}: {exc}", name=name
        ) from None
    return "\n".join(lines)


def _table_rows(table: Table) -> list[str]:
    """One line per row; a merged cell (python-docx repeats it) is written once."""
    rows: list[str] = []
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for cell in row.cells:
            if previous is not None and cell._tc is previous:
                continue
            previous = cell._tc
            cells.append(" ".join(cell.text.split()))
        rows.append(" | ".join(cells))
    return rows
