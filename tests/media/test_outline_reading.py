"""Documents read with their outline for the knowledge base (`media.parsers` with
`outline=True`, `media.html_text`): HTML's headings and title without its scripts, a DOCX's
heading styles whatever their ids, a PDF's pages and title; without the outline a
document reads as it always did."""

from __future__ import annotations

import io
import zipfile

import docx

from media.html_text import html_text
from media.parsers import read_document
from tests.app.test_cli_knowledge import manual_pdf, returns_docx


def test_html_reads_as_outlined_text_with_its_title() -> None:
    page = (
        "<html><head><title> Shop &amp;\n Co </title><style>p {}</style></head><body>"
        "<script>alert('no')</script><h1>Warranty <b>terms</b></h1><p>Every   appliance\n"
        "has one.</p><h2>Kettles</h2><ul><li>24 months</li><li>no limescale</li></ul>"
        "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table></body></html>"
    )
    read = html_text(page, max_chars=10_000)
    assert read.title == "Shop & Co"
    assert read.text == (
        "# Warranty terms\n\nEvery appliance has one.\n\n## Kettles\n\n24 months\n\n"
        "no limescale\n\na | b\n\n1 | 2"
    )
    assert read.complete


def test_html_reading_stops_past_its_budget() -> None:
    read = html_text("<p>word</p>" * 100_000, max_chars=1000)
    assert not read.complete
    assert 500 < len(read.text) <= 1_100


def test_docx_heading_styles_become_heading_lines() -> None:
    read = read_document(
        returns_docx(), name="r.docx", mime=None, max_bytes=10**7, max_chars=10**5, outline=True
    )
    assert read.text.splitlines() == [
        "# Returns",
        "Goods may be returned within 30 days.",
        "## Refunds",
        "Refunds reach the card in 5 working days.",
    ]
    plain = read_document(
        returns_docx(), name="r.docx", mime=None, max_bytes=10**7, max_chars=10**5
    )
    assert plain.text.splitlines()[0] == "Returns"


def test_a_localized_heading_style_is_known_by_its_english_name() -> None:
    """Word writes "heading 1" as the style's name in every language; its id may be
    "berschrift1" or anything else."""
    source = io.BytesIO()
    docx.Document().save(source)
    document = docx.Document()
    document.add_heading("Titel", level=1)
    document.add_paragraph("Text.")
    out = io.BytesIO()
    document.save(out)
    renamed = io.BytesIO()
    with zipfile.ZipFile(out) as old, zipfile.ZipFile(renamed, "w") as new:
        for item in old.infolist():
            data = old.read(item.filename)
            if item.filename in ("word/styles.xml", "word/document.xml"):
                data = data.replace(b'"Heading1"', b'"berschrift1"')
            new.writestr(item, data)
    read = read_document(
        renamed.getvalue(), name="d.docx", mime=None, max_bytes=10**7, max_chars=10**5,
        outline=True,
    )  # fmt: skip
    assert read.text.splitlines()[0] == "# Titel"


def test_a_pdf_says_where_each_page_starts_and_its_title() -> None:
    read = read_document(
        manual_pdf(), name="m.pdf", mime=None, max_bytes=10**7, max_chars=10**5, outline=True
    )
    assert read.title == "Toaster manual"
    assert [page for _, page in read.pages] == [1, 2, 3]
    for offset, page in read.pages:
        assert read.text[offset:].startswith(f"Setting {page} browns")
    plain = read_document(manual_pdf(), name="m.pdf", mime=None, max_bytes=10**7, max_chars=10**5)
    assert (plain.pages, plain.title, plain.text) == ((), "", read.text)
