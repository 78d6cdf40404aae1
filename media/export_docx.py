"""A consultation's transcript as a DOCX document.

Invariants: the document holds the transcript's parts in the order `core.turns.transcript`
gives them, under the transcript's labels; every text is read as Markdown by pyromark
(the parser the bot renders with), so headings, paragraphs with bold and italic, bullet
and numbered lists, tables and code blocks (monospace) come out as Word's own structures,
never as Markdown signs. The person's messages (the request, answers, follow-up questions) are
quotes, and a heading inside a quote is a quoted paragraph, so none can pass for a section
of the document. Characters XML cannot hold are dropped, so any stored text gives
a document. python-docx is imported on the first document made, never at start-up, and a
document is built synchronously (`docx_bytes`); an event loop awaits `built_docx`, which
builds on one thread of its own. Its cost is linear
in the text: a style's id is looked up once per text (python-docx searches every style of
the template, and compares with the default, on each lookup by name). A paragraph whose
first strong character is right-to-left (Arabic, Persian, Hebrew…; text inside bidi
isolates does not count, as in Unicode's paragraph rule) is a right-to-left paragraph
(`w:bidi`), so Word aligns and orders it as its readers expect, whatever the labels' language.
"""

from __future__ import annotations

import asyncio
import io
import re
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyromark

from core.turns.transcript import (
    Transcript,
    knowledge_markdown,
    quoted,
    round_markdown,
    tools_markdown,
)

if TYPE_CHECKING:
    from docx.document import Document
    from docx.table import Table
    from docx.text.paragraph import Paragraph

MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
MONOSPACE = "Courier New"
_OPTIONS = (
    pyromark.Options.ENABLE_TABLES
    | pyromark.Options.ENABLE_STRIKETHROUGH
    | pyromark.Options.ENABLE_TASKLISTS
)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_LIST_DEPTH = 3  # Word's default template styles lists to this depth
_BUILDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="export")
"""Documents are built one at a time, whoever asks (bot, API, terminal): a build holds the
GIL in turns with the event loop, and several at once (a 100,000-character answer takes
seconds) would stall it for longer each turn; one leaves it under about 35 ms on a busy
machine."""


async def built_docx(transcript: Transcript) -> bytes:
    """`docx_bytes(transcript)`, built on the export thread while the loop goes on."""
    return await asyncio.get_running_loop().run_in_executor(_BUILDER, docx_bytes, transcript)


def docx_bytes(transcript: Transcript) -> bytes:
    """The transcript as the bytes of a .docx file."""
    from docx import Document as new_document

    document = new_document()
    t, labels = transcript, transcript.labels
    document.add_heading(_clean(t.title) or labels.untitled, level=0)
    date = document.add_paragraph().add_run(labels.dated(t.started_at))
    date.italic = True
    document.add_heading(labels.request, level=1)
    add_markdown(document, quoted(t.request))
    for number, part in enumerate(t.rounds, 1):
        document.add_heading(labels.round_of(number), level=1)
        document.add_heading(labels.questions, level=2)
        add_markdown(document, round_markdown(part))
        if part.tools:
            add_markdown(document, tools_markdown(part.tools, labels))
        document.add_heading(labels.answer, level=2)
        add_markdown(
            document, quoted(part.answer) if part.answer is not None else labels.not_answered
        )
    if t.final_answer is not None:
        document.add_heading(labels.final, level=1)
        add_markdown(document, t.final_answer)
        if t.final_sources:
            add_markdown(document, knowledge_markdown(t.final_sources, labels))
        if t.final_tools:
            add_markdown(document, tools_markdown(t.final_tools, labels))
    if t.follow_ups:
        document.add_heading(labels.follow_ups, level=1)
    for number, follow_up in enumerate(t.follow_ups, 1):
        document.add_heading(labels.follow_up_of(number), level=2)
        add_markdown(document, quoted(follow_up.question))
        document.add_heading(labels.answer, level=3)
        answer = follow_up.answer if follow_up.answer is not None else labels.not_answered
        add_markdown(document, answer)
        if follow_up.sources:
            add_markdown(document, knowledge_markdown(follow_up.sources, labels))
        if follow_up.tools:
            add_markdown(document, tools_markdown(follow_up.tools, labels))
    set_directions(document)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


_BIDI_SUCCESSORS = (
    "w:adjustRightInd", "w:snapToGrid", "w:spacing", "w:ind", "w:contextualSpacing",
    "w:mirrorIndents", "w:suppressOverlap", "w:jc", "w:textDirection", "w:textAlignment",
    "w:textboxTightWrap", "w:outlineLvl", "w:divId", "w:cnfStyle", "w:rPr", "w:sectPr",
    "w:pPrChange",
)  # fmt: skip
"""What follows `w:bidi` in a paragraph's properties (the schema fixes their order)."""
_ISOLATES = frozenset("\u2066\u2067\u2068")
_POP_ISOLATE = "\u2069"


def set_directions(document: Document) -> None:
    """Mark every right-to-left paragraph of the body (tables' included) `w:bidi`."""
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    for p in document.element.body.iter(qn("w:p")):
        if right_to_left("".join(t.text or "" for t in p.iter(qn("w:t")))):
            p.get_or_add_pPr().insert_element_before(OxmlElement("w:bidi"), *_BIDI_SUCCESSORS)


def right_to_left(text: str) -> bool:
    """Whether `text`'s first strong character, outside bidi isolates, is right-to-left
    (Unicode's rule for a paragraph's direction); False with none."""
    depth = 0
    for char in text:
        if char in _ISOLATES:
            depth += 1
        elif char == _POP_ISOLATE:
            depth = max(0, depth - 1)
        elif not depth:
            kind = unicodedata.bidirectional(char)
            if kind in ("R", "AL"):
                return True
            if kind == "L":
                return False
    return False


@dataclass
class _Run:
    text: str
    bold: bool = False
    italic: bool = False
    strike: bool = False
    code: bool = False


@dataclass
class _List:
    ordered: bool
    next_number: int


@dataclass
class _Writer:
    """Walks pyromark's events, adding a paragraph, heading, table or code block to the
    document as each block ends."""

    document: Document
    runs: list[_Run] = field(default_factory=list)
    lists: list[_List] = field(default_factory=list)
    item_started: bool = False  # the current list item's first paragraph is written
    quote_depth: int = 0
    bold: int = 0
    italic: int = 0
    strike: int = 0
    links: list[str] = field(default_factory=list)
    code: list[str] | None = None
    table: list[list[list[_Run]]] | None = None
    style_ids: dict[str, str | None] = field(default_factory=dict)
    block_width: Any = None  # the page's text width, for tables: read once

    def styled(self, style: str | None) -> Paragraph:
        """A new paragraph in `style` (the template's name)."""
        paragraph = self.document.add_paragraph()
        if style is not None:
            paragraph._p.style = self.style_id(style)  # what `paragraph.style = ` sets
        return paragraph

    def grid(self, rows: int, cols: int) -> Table:
        """A new table in the "Table Grid" style. What `Document.add_table` does, but the
        page width it reads (searching the whole body each time) is read once."""
        if self.block_width is None:
            self.block_width = self.document._block_width
        table = self.document._body.add_table(rows, cols, self.block_width)
        table._tbl.tblStyle_val = self.style_id("Table Grid", table=True)
        return table

    def style_id(self, name: str, *, table: bool = False) -> str | None:
        """The id of the template's style `name`, looked up once per text."""
        if name not in self.style_ids:
            from docx.enum.style import WD_STYLE_TYPE

            kind = WD_STYLE_TYPE.TABLE if table else WD_STYLE_TYPE.PARAGRAPH
            self.style_ids[name] = self.document.styles.get_style_id(name, kind)
        return self.style_ids[name]

    def text(self, value: str, *, code: bool = False) -> None:
        if self.code is not None:
            self.code.append(value)
            return
        self.runs.append(_Run(_clean(value), self.bold > 0, self.italic > 0, self.strike > 0, code))

    def start(self, tag: Any) -> None:
        name, value = _tag(tag)
        if name in {"Paragraph", "Heading", "CodeBlock", "List", "Table", "BlockQuote"}:
            self.flush_item()
        if name == "List":
            self.lists.append(_List(value is not None, value if isinstance(value, int) else 1))
        elif name == "Item":
            self.item_started = False
            self.runs = []
        elif name == "CodeBlock":
            self.code = []
        elif name == "Table":
            self.table = []
        elif name in {"TableHead", "TableRow"} and self.table is not None:
            self.table.append([])
        elif name in {"Paragraph", "Heading", "TableCell"}:
            self.runs = []
        elif name == "BlockQuote":
            self.quote_depth += 1
        elif name == "Strong":
            self.bold += 1
        elif name == "Emphasis":
            self.italic += 1
        elif name == "Strikethrough":
            self.strike += 1
        elif name == "Link":
            self.links.append(str((value or {}).get("dest_url", "")))

    def end(self, tag: Any) -> None:
        name, value = _tag(tag)
        # A heading inside a quote is quoted text, not one of the document's.
        if name == "Paragraph" or (name == "Heading" and self.quote_depth):
            self.paragraph()
        elif name == "Heading":
            level = int(str(value).lstrip("H") or 1)
            heading = self.styled(f"Heading {min(level + 1, 9)}")
            _add_runs(heading, self.runs)
            self.runs = []
        elif name == "Item":
            self.flush_item()
            if self.lists:
                self.lists[-1].next_number += 1
        elif name == "List":
            if self.lists:
                self.lists.pop()
        elif name == "CodeBlock":
            self.code_block("".join(self.code or ()))
            self.code = None
        elif name == "TableCell" and self.table:
            self.table[-1].append(self.runs)
            self.runs = []
        elif name == "Table":
            self.write_table(self.table or [])
            self.table = None
        elif name == "BlockQuote":
            self.quote_depth = max(0, self.quote_depth - 1)
        elif name == "Strong":
            self.bold = max(0, self.bold - 1)
        elif name == "Emphasis":
            self.italic = max(0, self.italic - 1)
        elif name == "Strikethrough":
            self.strike = max(0, self.strike - 1)
        elif name == "Link" and self.links:
            url = self.links.pop()
            shown = "".join(run.text for run in self.runs)
            if url and url not in shown:
                self.runs.append(_Run(f" ({_clean(url)})"))

    def flush_item(self) -> None:
        """Write a tight list item's text (it has no paragraph of its own) before what
        follows it inside the item."""
        if self.lists and not self.item_started and self.runs:
            self.paragraph()

    def paragraph(self) -> None:
        """The runs gathered so far as a paragraph, styled by where it stands."""
        style = None
        prefix = ""
        if self.lists and not self.item_started:
            current = self.lists[-1]
            depth = min(len(self.lists), _LIST_DEPTH)
            suffix = "" if depth == 1 else f" {depth}"
            if current.ordered:
                style, prefix = f"List{suffix}", f"{current.next_number}. "
            else:
                style = f"List Bullet{suffix}"
            self.item_started = True
        elif self.lists:
            style = (
                "List Continue"
                if len(self.lists) == 1
                else f"List Continue {min(len(self.lists), _LIST_DEPTH)}"
            )
        elif self.quote_depth:
            style = "Quote"
        paragraph = self.styled(style)
        if prefix:
            paragraph.add_run(prefix)
        _add_runs(paragraph, self.runs)
        self.runs = []

    def code_block(self, text: str) -> None:
        paragraph = self.document.add_paragraph()
        run = paragraph.add_run(_clean(text.rstrip("\n")))
        run.font.name = MONOSPACE

    def write_table(self, rows: list[list[list[_Run]]]) -> None:
        width = max((len(row) for row in rows), default=0)
        if not width:
            return
        table = self.grid(len(rows), width)
        for r, row in enumerate(rows):
            for c, runs in enumerate(row):
                paragraph = table.cell(r, c).paragraphs[0]
                _add_runs(paragraph, runs, bold=r == 0)


def add_markdown(document: Document, markdown: str) -> None:
    """Append `markdown`'s blocks to the document as Word structures."""
    writer = _Writer(document)
    for event in pyromark.events(_clean(markdown), options=_OPTIONS):
        if isinstance(event, str):
            if event == "SoftBreak":
                writer.text(" ")
            elif event == "HardBreak":
                writer.text("\n")
            continue
        if "Start" in event:
            writer.start(event["Start"])
        elif "End" in event:
            writer.end(event["End"])
        elif "Text" in event:
            writer.text(str(event["Text"]))
        elif "Code" in event:
            writer.text(str(event["Code"]), code=True)
        elif "Html" in event or "InlineHtml" in event:
            writer.text(str(event.get("Html", event.get("InlineHtml"))))
        elif "InlineMath" in event or "DisplayMath" in event:
            writer.text(str(event.get("InlineMath", event.get("DisplayMath"))), code=True)
        elif "TaskListMarker" in event:
            writer.text("[x] " if event["TaskListMarker"] else "[ ] ")
    writer.flush_item()
    if writer.runs:
        writer.paragraph()


def _tag(tag: Any) -> tuple[str, Any]:
    """A pyromark tag as its name and value: `"Paragraph"` or `{"List": 1}`."""
    if isinstance(tag, dict):
        name = next(iter(tag), "")
        return str(name), tag.get(name)
    return str(tag), None


def _add_runs(paragraph: Any, runs: list[_Run], *, bold: bool = False) -> None:
    for part in runs:
        if not part.text:
            continue
        run = paragraph.add_run(part.text)
        run.bold = part.bold or bold or None
        run.italic = part.italic or None
        if part.strike:
            run.font.strike = True
        if part.code:
            run.font.name = MONOSPACE


def _clean(text: str) -> str:
    return _NOT_XML.sub("", text)
