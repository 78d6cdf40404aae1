"""The text of an HTML page with its outline: headings h1–h6 as Markdown heading lines,
blocks apart by blank lines, table cells apart by " | ", and the page's <title>.

Invariants: nothing in <head> (but the title), <script>, <style>, <template>,
<noscript>, <svg> or <math> is text; entities are resolved by the standard library's
`html.parser`, nothing is fetched and no markup is executed; runs of white space outside
<pre> become one space, lines lose their indentation, and a heading is one line;
reading stops once more than `max_chars` characters were read, and then says the text
is incomplete. Run in a reader process (`media.parsers`), within its deadline and
memory limit.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from media.documents import Extracted

_HIDDEN = frozenset({"head", "script", "style", "template", "noscript", "svg", "math"})
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "br", "dd", "details", "div",
        "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hr",
        "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody",
        "thead", "tfoot", "tr", "ul", "caption",
    }
)  # fmt: skip
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_CELLS = frozenset({"td", "th"})
_SPACES = re.compile(r"\s+")
_BLANK_LINES = re.compile(r"\n{3,}")
MAX_TITLE_CHARS = 300
FEED_CHARS = 65_536  # fed a piece at a time, so reading stops soon after the budget


class _Page(HTMLParser):
    def __init__(self, max_chars: int) -> None:
        super().__init__(convert_charrefs=True)
        self.max_chars = max_chars
        self.parts: list[str] = []
        self.chars = 0
        self.hidden = 0  # hidden elements open
        self.pre = 0
        self.heading: list[str] | None = None  # the open heading's words
        self.title: list[str] | None = None
        self.title_text = ""
        self.full = False
        self.cell_open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self.title_text:
            self.title = []
        elif tag in _HIDDEN:
            self.hidden += 1
        elif tag in _HEADINGS and self.heading is None:
            self._break()
            self.heading = ["#" * _HEADINGS[tag], " "]
        elif tag in _CELLS:
            if self.cell_open:
                self._add(" | ")
            self.cell_open = True
        elif tag in _BLOCKS:
            self._break()
            if tag == "tr":
                self.cell_open = False
            if tag == "pre":
                self.pre += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self.title is not None:
            self.title_text = " ".join("".join(self.title).split())[:MAX_TITLE_CHARS]
            self.title = None
        elif tag in _HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in _HEADINGS and self.heading is not None:
            marks, words = self.heading[0], " ".join("".join(self.heading[2:]).split())
            self.heading = None
            if words:
                self._add(marks + " " + words)
            self._break()
        elif tag in _BLOCKS:
            if tag == "pre":
                self.pre = max(0, self.pre - 1)
            self._break()

    def handle_data(self, data: str) -> None:
        if self.title is not None:
            self.title.append(data)
        elif self.hidden:
            return
        elif self.heading is not None:
            self.heading.append(data)
        else:
            self._add(data if self.pre else _SPACES.sub(" ", data))

    def _break(self) -> None:
        self._add("\n\n")

    def _add(self, text: str) -> None:
        if self.full or not text:
            return
        self.parts.append(text)
        self.chars += len(text)
        if self.chars > self.max_chars:
            self.full = True


def html_text(source: str, *, max_chars: int) -> Extracted:
    """The text of the HTML page `source`, with its headings and title."""
    page = _Page(max_chars)
    for start in range(0, len(source), FEED_CHARS):
        page.feed(source[start : start + FEED_CHARS])
        if page.full:
            break
    else:
        page.close()
    lines = (line.strip() for line in "".join(page.parts).split("\n"))
    text = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    return Extracted(text, complete=not page.full, title=page.title_text)
