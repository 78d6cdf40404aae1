"""Documents for the production smoke, made and read with the standard library alone
(fpdf2 and python-docx are not what is under test).

Invariant: `pdf_with_text` is a valid one-page PDF whose text layer is `text` (standard
Helvetica, printable ASCII), its cross-reference offsets exact; `docx_with_text` is the
smallest DOCX a word processor opens, one paragraph of `text`; `docx_paragraphs` reads an
exported DOCX back as the text of each paragraph of its main part.
"""

from __future__ import annotations

import io
import zipfile
from xml.etree import ElementTree

WORD = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_CONTENT_TYPES = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml"
 ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
</Types>"""
_RELS = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Target="word/document.xml"
 Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"/>
</Relationships>"""


def pdf_with_text(text: str) -> bytes:
    """A one-page PDF showing `text` (printable ASCII without backslashes or parentheses)."""
    assert text.isascii() and not set(text) & set("\\()"), text
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def docx_with_text(text: str) -> bytes:
    """A DOCX of one paragraph holding `text`."""
    document = ElementTree.Element(f"{{{WORD}}}document")
    body = ElementTree.SubElement(document, f"{{{WORD}}}body")
    run = ElementTree.SubElement(ElementTree.SubElement(body, f"{{{WORD}}}p"), f"{{{WORD}}}r")
    ElementTree.SubElement(run, f"{{{WORD}}}t").text = text
    ElementTree.register_namespace("w", WORD)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _RELS)
        archive.writestr("word/document.xml", ElementTree.tostring(document, xml_declaration=True))
    return out.getvalue()


def docx_paragraphs(data: bytes) -> list[str]:
    """The text of each paragraph of a DOCX file's main part, in order."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        root = ElementTree.fromstring(archive.read("word/document.xml"))
    return [
        "".join(t.text or "" for t in paragraph.iter(f"{{{WORD}}}t"))
        for paragraph in root.iter(f"{{{WORD}}}p")
    ]
