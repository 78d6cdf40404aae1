"""The words of a DOCX, read as a stream: paragraphs and table rows in document order.

Invariants: word/document.xml is parsed incrementally (lxml `iterparse`) and every
element is dropped from the tree once its end is read (its text taken), so the memory
parsing takes does not grow with the document, not even with one endless paragraph;
reading stops before the paragraph or cell past `MAX_PARAGRAPHS` / `MAX_CELLS`, or once
more than `max_chars` characters are read (counting the open paragraph's words, which
then end the text), and then says the text is incomplete. No entity is resolved, no
DTD loaded and nothing fetched: an entity reference is left out and the text around it
kept. Text in a paragraph nested inside another (a text box) is not read.
"""

from __future__ import annotations

import re
from typing import IO

from lxml import etree

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_P, _R, _T, _TBL, _TR, _TC = (f"{W}{tag}" for tag in ("p", "r", "t", "tbl", "tr", "tc"))
_PSTYLE, _OUTLINE, _VAL = f"{W}pStyle", f"{W}outlineLvl", f"{W}val"
_STYLE, _NAME, _STYLE_ID = f"{W}style", f"{W}name", f"{W}styleId"
DOCX_STYLES_PART = "word/styles.xml"
_HEADING_NAME = re.compile(r"heading ([1-9])")
MAX_STYLES = 10_000
_RUN_MARKS = {f"{W}tab": "\t", f"{W}br": "\n", f"{W}cr": "\n", f"{W}noBreakHyphen": "-"}

MAX_PARAGRAPHS = 50_000
MAX_CELLS = 50_000


class _Cut(Exception):
    """A cap was reached: what was read so far is the text."""


class _Body:
    """What the paragraphs read so far add up to; tables as a stack of (rows, cells)."""

    def __init__(self, max_chars: int, headings: dict[str, int] | None = None) -> None:
        self.max_chars = max_chars
        self.headings = headings  # None: headings are not marked
        self.level = 0  # the open paragraph's heading level (0: none)
        self.lines: list[str] = []
        self.chars = 0
        self.paragraphs = 0
        self.cells = 0
        self.run_text: list[str] = []  # the open paragraph's words
        self.run_chars = 0  # their length
        self.depth = 0  # paragraphs open (more than one: a text box inside a paragraph)
        self.tables: list[list[list[str]]] = []  # per open table: the open cell's paragraphs
        self.rows: list[list[str]] = []  # per open table: the open row's cells

    def start(self, tag: str) -> None:
        if tag == _P:
            if self.depth == 0:
                self._check(self.paragraphs >= MAX_PARAGRAPHS)
                self.paragraphs += 1
            self.depth += 1
        elif tag == _TC:
            self._check(self.cells >= MAX_CELLS)
            self.cells += 1
            self.tables[-1].append([])
        elif tag == _TR:
            self.rows.append([])
        elif tag == _TBL:
            self.tables.append([])

    def end(self, element: etree._Element) -> None:
        tag = element.tag
        if self.headings is not None and self.depth == 1 and tag in (_PSTYLE, _OUTLINE):
            self.level = _level_of(element, self.headings) or self.level
        elif self.depth == 1 and tag == _T:
            # An entity left unresolved is a child node; the text after it is its tail.
            self._words((element.text or "") + "".join(c.tail or "" for c in element))
        elif self.depth == 1 and tag in _RUN_MARKS and _parent_tag(element) == _R:
            self._words(_RUN_MARKS[tag])
        elif tag == _P:
            self.depth -= 1
            if self.depth == 0:
                text = "".join(self.run_text)
                if self.level and not self.tables and text.strip():
                    text = "#" * min(self.level, 6) + " " + " ".join(text.split())
                self._paragraph(text)
                self.run_text = []
                self.run_chars = 0
                self.level = 0
        elif tag == _TC and self.tables:
            cell = self.tables[-1].pop() if self.tables[-1] else []
            self.rows[-1].append(" ".join(" ".join(cell).split()))
        elif tag == _TR and self.rows:
            self._row(" | ".join(self.rows.pop()))
        elif tag == _TBL and self.tables:
            self.tables.pop()

    def _words(self, text: str) -> None:
        """Words of the open paragraph; past the budget they end the text."""
        if not text:  # millions of empty runs must not make a list of millions
            return
        self.run_text.append(text)
        self.run_chars += len(text)
        if self.chars + self.run_chars > self.max_chars:
            self._paragraph("".join(self.run_text))
            raise _Cut

    def _paragraph(self, text: str) -> None:
        """A paragraph done: a line of the body, or part of the open cell's text."""
        if self.tables and self.tables[-1]:
            self.tables[-1][-1].append(text)
        else:
            self._line(text)

    def _row(self, text: str) -> None:
        """A table row done: a line of the body, or part of the cell its table is in."""
        if len(self.tables) > 1 and self.tables[-2]:
            self.tables[-2][-1].append(text)
        else:
            self._line(text)

    def _line(self, text: str) -> None:
        self.lines.append(text)
        self.chars += len(text) + 1

    def _check(self, over_cap: bool) -> None:
        if over_cap or self.chars > self.max_chars:
            raise _Cut


def _level_of(element: etree._Element, headings: dict[str, int]) -> int:
    """The heading level a paragraph's style or outline level gives it (0: none)."""
    value = element.get(_VAL) or ""
    if element.tag == _PSTYLE:
        return headings.get(value, 0)
    return int(value) + 1 if value.isdigit() and int(value) < 9 else 0


def heading_styles(stream: IO[bytes]) -> dict[str, int]:
    """The paragraph styles of the styles part `stream` that are headings, by style id:
    Word's built-in "heading N" and "Title" (their names are English whatever the
    language of the document, where their ids are not), and any with an outline level.
    At most `MAX_STYLES` styles are looked at, read as a stream."""
    found: dict[str, int] = {}
    seen = 0
    style_id, level = "", 0
    for event, element in etree.iterparse(
        stream, events=("start", "end"), resolve_entities=False, load_dtd=False,
        no_network=True, huge_tree=False, remove_comments=True, remove_pis=True,
    ):  # fmt: skip
        if event == "start":
            if element.tag == _STYLE:
                style_id, level = element.get(_STYLE_ID) or "", 0
            continue
        if element.tag == _NAME:
            name = (element.get(_VAL) or "").lower()
            heading = _HEADING_NAME.fullmatch(name)
            level = 1 if name == "title" else int(heading.group(1)) if heading else level
        elif element.tag == _OUTLINE:
            value = element.get(_VAL) or ""
            level = level or (int(value) + 1 if value.isdigit() and int(value) < 9 else 0)
        elif element.tag == _STYLE:
            if style_id and level:
                found[style_id] = level
            seen += 1
            _drop(element)
            if seen == MAX_STYLES:
                break
    return found


def docx_body_text(
    stream: IO[bytes], *, max_chars: int, headings: dict[str, int] | None = None
) -> tuple[str, bool]:
    """(the text of the main document part `stream`, whether all of it was read);
    raises `etree.XMLSyntaxError` for a part that is not well-formed XML. With `headings`
    (style id: level), a paragraph of a heading style, or with an outline level of its
    own, is a Markdown heading line."""
    body = _Body(max_chars, headings)
    events = etree.iterparse(
        stream,
        events=("start", "end"),
        resolve_entities=False,
        load_dtd=False,
        no_network=True,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )
    complete = True
    try:
        for event, element in events:
            if event == "start":
                body.start(element.tag)
                continue
            body.end(element)
            _drop(element)
    except _Cut:
        complete = False
    return "\n".join(body.lines), complete


def _parent_tag(element: etree._Element) -> object:
    parent = element.getparent()
    return None if parent is None else parent.tag


def _drop(element: etree._Element) -> None:
    """Forget an element read to its end, and the siblings read before it."""
    element.clear(keep_tail=False)
    parent = element.getparent()
    if parent is not None:
        while element.getprevious() is not None:
            del parent[0]
