"""The text of a PDF or DOCX: the parsing libraries, loaded in reader processes only.

Invariants: a DOCX (a ZIP) is parsed only when its parts unpack to at most
`unpacked_limit` bytes, and then as a stream (`media.docx_text`). A PDF is read page by
page up to `MAX_PDF_PAGES`, a PDF or DOCX only until more than `max_chars` characters
are read: the result says whether the text is complete. Every failure is an
`AttachmentRefused` naming the file; running out of memory is not a failure of the
file's but a `MemoryError` the caller handles. Only `media.reader_process` imports this
module: pypdf and lxml cost the bot process neither memory nor start-up time.
"""

from __future__ import annotations

import io
import logging
import zipfile

import pypdf
from lxml import etree

from core.domain.errors import AttachmentProblem, AttachmentRefused
from media.documents import Extracted, document_format, is_html, read_text, with_text
from media.docx_text import DOCX_STYLES_PART, docx_body_text, heading_styles
from media.html_text import html_text
from media.sniff import DOCX_MAIN_PART
from media.text import decode_text

log = logging.getLogger(__name__)

MAX_UNPACKED_BYTES = 200_000_000
UNPACK_RATIO = 20  # a DOCX may unpack to 20 times the document byte limit, at most


def unpacked_limit(max_document_bytes: int) -> int:
    """How many bytes a DOCX's parts may unpack to, in total."""
    return min(UNPACK_RATIO * max_document_bytes, MAX_UNPACKED_BYTES)


MAX_PDF_PAGES = 500


def read_document(
    data: bytes,
    *,
    name: str,
    mime: str | None,
    max_bytes: int,
    max_chars: int,
    outline: bool = False,
) -> Extracted:
    """The text of the document `data`, which is at most `max_bytes` long (the document
    byte limit, which also bounds a DOCX's unpacked size); a PDF, DOCX or HTML page is
    read until more than `max_chars` characters are read. With `outline`, its headings,
    pages and title too (`media.documents.Extracted`), and an HTML page as text without
    its markup. Raises `AttachmentRefused` (UNSUPPORTED, UNREADABLE, NO_TEXT)."""
    label = name or None
    kind = document_format(data, name=name, mime=mime)
    if kind == "pdf":
        found = _pdf_text(data, label, max_chars, outline=outline)
    elif kind == "docx":
        found = _docx_text(data, label, unpacked_limit(max_bytes), max_chars, outline=outline)
    elif outline and is_html(name, mime):
        kind = "HTML page"
        found = html_text(decode_text(data), max_chars=max_chars)
    else:
        return read_text(data, name=name)
    return with_text(found, kind, name=name)


def _pdf_text(data: bytes, name: str | None, max_chars: int, *, outline: bool) -> Extracted:
    """The text layer of the pages, pages apart by a blank line; with `outline`, where
    each page starts and the title of the document's metadata."""
    pages: list[str] = []
    chars = 0
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise AttachmentRefused(AttachmentProblem.UNREADABLE, "encrypted PDF", name=name)
        title = _pdf_title(reader) if outline else ""
        count = len(reader.pages)
        for index in range(count):
            if index == MAX_PDF_PAGES or chars > max_chars:
                return _pages(pages, outline, title, complete=False)
            page = (reader.pages[index].extract_text() or "").strip("\n")
            pages.append(page)
            chars += len(page) + 2
    except (AttachmentRefused, MemoryError):
        raise
    except pypdf.errors.DependencyError:  # AES, which the reader process does not decrypt
        raise AttachmentRefused(
            AttachmentProblem.UNREADABLE, "encrypted PDF (AES)", name=name
        ) from None
    except Exception as exc:  # pypdf raises many kinds on a broken or hostile file
        log.info("PDF %r unreadable: %r", name, exc)
        raise AttachmentRefused(
            AttachmentProblem.UNREADABLE, f"PDF: {type(exc).__name__}: {exc}", name=name
        ) from None
    return _pages(pages, outline, title, complete=True)


def _pages(pages: list[str], outline: bool, title: str, *, complete: bool) -> Extracted:
    """The pages with text joined by blank lines; with `outline`, where each starts."""
    kept = [(number, page) for number, page in enumerate(pages, start=1) if page.strip()]
    starts: list[tuple[int, int]] = []
    offset = 0
    for number, page in kept:
        starts.append((offset, number))
        offset += len(page) + 2
    text = "\n\n".join(page for _, page in kept)
    return Extracted(text, complete, tuple(starts) if outline else (), title)


def _pdf_title(reader: pypdf.PdfReader) -> str:
    """The title the metadata names, if it is readable text."""
    try:
        title = reader.metadata.title if reader.metadata is not None else None
    except Exception:  # a damaged information dictionary names no title
        return ""
    return " ".join(str(title).split())[:300] if title else ""


def _docx_text(
    data: bytes, name: str | None, limit: int, max_chars: int, *, outline: bool
) -> Extracted:
    """Paragraphs and table rows in document order; a row's cells apart by " | "; with
    `outline`, paragraphs of a heading style as Markdown heading lines."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(member.file_size for member in archive.infolist())
            if unpacked > limit:
                raise AttachmentRefused(
                    AttachmentProblem.UNREADABLE,
                    f"DOCX unpacks to {unpacked} bytes, over {limit}",
                    name=name,
                )
            headings: dict[str, int] = {}
            if outline and DOCX_STYLES_PART in archive.namelist():
                with archive.open(DOCX_STYLES_PART) as part:
                    headings = heading_styles(part)
            with archive.open(DOCX_MAIN_PART) as part:
                text, complete = docx_body_text(
                    part, max_chars=max_chars, headings=headings if outline else None
                )
    except (AttachmentRefused, MemoryError):
        raise
    except (zipfile.BadZipFile, KeyError, OSError, ValueError, etree.LxmlError) as exc:
        log.info("DOCX %r unreadable: %r", name, exc)
        raise AttachmentRefused(
            AttachmentProblem.UNREADABLE, f"DOCX: {type(exc).__name__}: {exc}", name=name
        ) from None
    return Extracted(text, complete)
