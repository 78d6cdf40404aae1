"""Hostile documents, made on the spot (no binary blobs): small files that cost a reader
far more time or memory than their size suggests, and one that hides text behind an
external entity. Used by the tests and by `python -m bench`'s hostile-documents phase."""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Iterator

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
    'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-'
    'officedocument.wordprocessingml.document.main+xml"/></Types>'
)
_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships/officeDocument" Target="word/document.xml"/></Relationships>'
)


def repeated_page_pdf(
    *, pages: int = 60, operators: int = 100_000, operator: bytes = b"(ab) Tj\n"
) -> bytes:
    """A PDF whose every page draws the same content stream of `operators` text-showing
    operators: a few KB compressed, seconds of text extraction per page."""
    content = b"BT /F1 12 Tf 72 720 Td\n" + operator * operators + b"ET\n"
    return _one_stream_pdf(zlib.compress(content, 9), pages=pages)


def _one_stream_pdf(packed: bytes, *, pages: int) -> bytes:
    """`pages` references to one page drawing the Flate-compressed content `packed`."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(b"3 0 R" for _ in range(pages))
        + b"] /Count "
        + str(pages).encode()
        + b" >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length "
        + str(len(packed)).encode()
        + b" /Filter /FlateDecode >>\nstream\n"
        + packed
        + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return _pdf(objects)


def _pdf(objects: list[bytes]) -> bytes:
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\n" % (len(objects) + 1))
    out.write(b"startxref\n%d\n%%%%EOF\n" % xref)
    return out.getvalue()


def docx_of(body: Iterator[bytes], *, doctype: bytes = b"") -> bytes:
    """A minimal DOCX whose word/document.xml body is the chunks of `body`, written
    streaming so a part of hundreds of MB never sits in memory whole."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _RELS)
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            part.write(b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n' + doctype)
            part.write(b'<w:document xmlns:w="' + W_NS.encode() + b'"><w:body>')
            for chunk in body:
                part.write(chunk)
            part.write(b"</w:body></w:document>")
    return out.getvalue()


def million_cell_docx(*, rows: int = 1000, columns: int = 1000) -> bytes:
    """A table of `rows` x `columns` empty cells: ~150 KB packed, a million cells."""
    row = b"<w:tr>" + b"<w:tc><w:p/></w:tc>" * columns + b"</w:tr>"
    return docx_of(iter([b"<w:tbl>", *(row for _ in range(rows)), b"</w:tbl>"]))


def paragraph_flood_docx(*, megabytes: int = 195) -> bytes:
    """Paragraphs of short runs until the part unpacks to about `megabytes` MB."""
    paragraph = b"<w:p><w:r><w:t>word</w:t></w:r><w:r><w:t> x</w:t></w:r></w:p>"
    chunk = paragraph * (1_000_000 // len(paragraph))
    return docx_of(chunk for _ in range(megabytes))


def external_entity_docx() -> bytes:
    """A paragraph whose run names an external entity between two words."""
    doctype = b'<!DOCTYPE w:document [<!ENTITY secret SYSTEM "file:///etc/hostname">]>\n'
    body = (
        b"<w:p><w:r><w:t>before &secret; after</w:t></w:r></w:p>"
        b"<w:p><w:r><w:t>next</w:t></w:r></w:p>"
    )
    return docx_of(iter([body]), doctype=doctype)


def costly_pages_pdf(*, pages: int = 60, operators: int = 100_000) -> bytes:
    """Like `repeated_page_pdf`, but the pages show no text: no character cap ends the
    read early, only the page cap or the deadline."""
    return repeated_page_pdf(
        pages=pages, operators=operators, operator=b"1 0 0 1 72 700 Tm () Tj\n"
    )


def inflating_pdf(*, megabytes: int = 70) -> bytes:
    """One page whose content stream inflates from a few KB to `megabytes` MB."""
    content = b"BT /F1 12 Tf 72 720 Td (x) Tj ET\n" + b" " * (megabytes * 2**20)
    return _one_stream_pdf(zlib.compress(content, 9), pages=1)


def one_paragraph_docx(*, runs: int = 2_000_000, text: bytes = b"ab") -> bytes:
    """One paragraph of `runs` short runs: ~120 KB packed, millions of characters (or
    none, with an empty `text`) and millions of elements before the paragraph ends."""
    run = b"<w:r><w:t>" + text + b"</w:t></w:r>"
    chunk = run * 10_000
    return docx_of(iter([b"<w:p>", *(chunk for _ in range(runs // 10_000)), b"</w:p>"]))
