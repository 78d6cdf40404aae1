"""A document's text cut into passages that keep their place: the heading path above each
and, for a PDF, its page.

Invariants:
- every chunk is at most `CHUNK_CHARS` characters, cut where the text allows it best
  (semantic-text-splitter: between paragraphs, else sentences, else words, by Unicode's
  rules for every script), and repeats up to `OVERLAP_CHARS` of its neighbour's end, so
  the words around a cut are read with what comes before them;
- a chunk lies within one section and one page: its `section` is the heading path above
  it (`Warranty terms › Kettles`; empty before the first heading and for text without
  headings) and its `page` the 1-based page it is on, None where the text has no pages;
- headings are read only from outlined text (`outline=True`): Markdown's ATX (`## Kettles`)
  and one-line setext headings outside fenced code, which is also how the document
  readers write HTML's h1–h6 and DOCX's heading styles; the first `MAX_HEADINGS` of them,
  among the first `MAX_CANDIDATES` lines that may be a heading or a fence (later ones
  stay text);
- the cost is linear in the text's length: the splitter, whose cost grows faster on text
  without sentence ends, sees at most `WINDOW_CHARS` at a time (windows end at a blank
  line, else a line end, else a space), and a heading keeps at most `MAX_HEADING_CHARS`.
Pure: the splitter is imported by the loading of documents only, never by the bot.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from semantic_text_splitter import TextSplitter

from core.domain.knowledge import SECTION_SEPARATOR, Chunk

CHUNK_CHARS = 800
OVERLAP_CHARS = 120
WINDOW_CHARS = 8_000
MAX_HEADING_CHARS = 120

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_CANDIDATE = re.compile(r"^ {0,3}(?:#{1,6}(?:[ \t]|$)|=+[ \t]*$|-+[ \t]*$|`{3}|~{3})", re.MULTILINE)
MAX_HEADINGS = 10_000
MAX_CANDIDATES = 50_000  # lines that may be a heading or a fence, looked at one by one


@dataclass(frozen=True, slots=True)
class _Section:
    path: str
    start: int
    end: int


def chunk_text(
    text: str,
    *,
    outline: bool,
    pages: Sequence[tuple[int, int]] = (),
    size: int = CHUNK_CHARS,
    overlap: int = OVERLAP_CHARS,
) -> list[Chunk]:
    """`text` cut into chunks in document order, numbered from 0. `pages` are the
    (offset in `text`, page number) where each page starts, in order."""
    splitter = TextSplitter(size, overlap=overlap)
    starts = [offset for offset, _ in pages]
    chunks: list[Chunk] = []
    for section in _sections(text, outline):
        for start, end in _windows(text, section.start, section.end, starts):
            page = pages[bisect.bisect_right(starts, start) - 1][1] if pages else None
            for _, piece in splitter.chunk_indices(text[start:end]):
                if piece.strip():
                    chunks.append(Chunk(len(chunks), section.path, page, piece))
    return chunks


def _sections(text: str, outline: bool) -> list[_Section]:
    """The text between headings, each with the path of headings above it."""
    if not outline:
        return [_Section("", 0, len(text))]
    sections: list[_Section] = []
    path: list[tuple[int, str]] = []
    body_start = 0
    for level, title, line_start, line_end in _headings(text):
        sections.append(_Section(_joined(path), body_start, line_start))
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, title))
        body_start = line_end
    sections.append(_Section(_joined(path), body_start, len(text)))
    return [s for s in sections if text[s.start : s.end].strip()]


def _joined(path: list[tuple[int, str]]) -> str:
    return SECTION_SEPARATOR.join(title for _, title in path if title)


def _headings(text: str) -> Iterator[tuple[int, str, int, int]]:
    """(level, title, where its line starts, where the text after it starts) of the first
    `MAX_HEADINGS` headings. Only lines that may open or close a fence or be a heading
    are looked at in Python, the first `MAX_CANDIDATES` of them; the rest are passed
    over by one regular expression."""
    fence = ""
    found = 0
    for looked, match in enumerate(_CANDIDATE.finditer(text)):
        if looked == MAX_CANDIDATES:
            return
        start = match.start()
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        line = text[start:end].rstrip("\n")
        opened = _FENCE.match(line)
        if fence:
            if opened and _closes(fence, opened.group(1), line[opened.end() :]):
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        if found == MAX_HEADINGS:
            return
        atx = _ATX.fullmatch(line)
        if atx:
            found += 1
            yield len(atx.group(1)), _title(atx.group(2) or ""), start, end
            continue
        underline = _SETEXT.fullmatch(line)
        above = _line_above(text, start) if underline else None
        if underline and above is not None:
            found += 1
            level = 1 if underline.group(1)[0] == "=" else 2
            yield level, _title(text[above:start]), above, end


def _closes(fence: str, mark: str, rest: str) -> bool:
    """A fence is closed by a run of its own character, as long or longer, alone."""
    return mark[0] == fence[0] and len(mark) >= len(fence) and not rest.strip()


def _line_above(text: str, start: int) -> int | None:
    """Where the line above the one at `start` begins, when it holds text and is the
    first line of its paragraph (a blank line or the text's start above it)."""
    if start == 0:
        return None
    above = text.rfind("\n", 0, start - 1) + 1
    line = text[above : start - 1]
    if not line.strip() or _ATX.fullmatch(line) or _FENCE.match(line):
        return None
    if above == 0:
        return above
    before = text.rfind("\n", 0, above - 1) + 1
    return above if not text[before : above - 1].strip() else None


def _title(raw: str) -> str:
    """A heading's words on one line, at most `MAX_HEADING_CHARS` of them."""
    return " ".join(raw.split())[:MAX_HEADING_CHARS].strip()


def _windows(text: str, start: int, end: int, page_starts: list[int]) -> Iterator[tuple[int, int]]:
    """[start, end) cut at page starts, then into pieces of at most `WINDOW_CHARS` that
    end at a blank line, else a line end, else a space where one is in their second half."""
    inside = page_starts[bisect.bisect_right(page_starts, start) :]
    bounds = [p for p in inside if p < end] + [end]
    for stop in bounds:
        while start < stop:
            cut = stop
            if stop - start > WINDOW_CHARS:
                limit = start + WINDOW_CHARS
                half = start + WINDOW_CHARS // 2
                for mark in ("\n\n", "\n", " "):
                    found = text.rfind(mark, half, limit)
                    if found >= 0:
                        cut = found + len(mark)
                        break
                else:
                    cut = limit
            yield start, cut
            start = cut


def top_heading(chunks: Sequence[Chunk]) -> str:
    """The heading every chunk sits under, when the document has one over all its text (a
    Markdown file opening with its `# Title`): it titles the document. "" when some text
    lies outside any such heading. The chunks keep it in their heading paths, which search
    reads; `core.domain.knowledge.Passage.place` shows it once, as the title."""
    first = chunks[0].section.split(SECTION_SEPARATOR, 1)[0] if chunks else ""
    if not first or any(
        c.section != first and not c.section.startswith(first + SECTION_SEPARATOR) for c in chunks
    ):
        return ""
    return first
