"""Model Markdown → Telegram messages (text + entities), split to fit.

Invariants, for every ``Part`` returned:
- its text is at most ``limit`` UTF-16 code units, non-blank, and never cut inside a surrogate pair;
- every entity lies inside its text (UTF-16 offsets) and a part carries at most 100 entities;
- nothing the model wrote vanishes: text that looks like HTML (``<div>``, ``&amp;``) is escaped
  before conversion and shown literally, and if conversion fails or yields nothing the raw
  Markdown is sent as plain text.

Fallback when Telegram still rejects a part's formatting: resend ``part.text`` with no entities
(it already fits). ``plain_parts`` splits any other text (raw Markdown, UI strings) the same way.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import pyromark  # telegramify-markdown's parser: asked where code is, as the converter sees it
import telegramify_markdown
from telegram import MessageEntity
from telegramify_markdown import utf16_len

from core.domain.knowledge_sources import KnowledgeSource
from core.domain.sources import Source

try:  # LaTeX must become `$…$` math before escaping, so `<` inside it is not escaped twice
    from telegramify_markdown.converter import _escape_latex as _latex_to_math
except ImportError:  # pragma: no cover - a later 1.x may move it; then LaTeX stays as text

    def _latex_to_math(text: str) -> str:
        return text


log = logging.getLogger(__name__)

TELEGRAM_LIMIT = 4096
MAX_ENTITIES = 100  # Telegram ignores formatting beyond this many entities in one message

_OPTIONS = (
    pyromark.Options.ENABLE_TABLES
    | pyromark.Options.ENABLE_STRIKETHROUGH
    | pyromark.Options.ENABLE_TASKLISTS
    | pyromark.Options.ENABLE_MATH
)
# An escaped character, a CommonMark autolink or `](<` link destination (both kept: they are
# Markdown, not HTML), or a `<`/`&` to escape.
_HTMLISH = re.compile(
    rb"\\[\s\S]|<[A-Za-z][A-Za-z0-9+.\-]{1,31}:[^<>\x00-\x20]*>|\]\(<[^<>\n\\]*>\)|[<&]|\[(?=\]\()"
)
_SCHEME = re.compile(r"(?:https?|ftp|tg|mailto):\S+$", re.IGNORECASE)
_BARE_DOMAIN = re.compile(r"[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}(?:[/?#]\S*)?")
_LANGUAGE = re.compile(r"[\w+#.\-]{1,32}")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_MATH_EVENTS = ("InlineMath", "DisplayMath")
_LINE_LEAD = re.compile(rb"[ \t>]*")  # what may precede an HTML block's `<` on its line
_MARKDOWN_SIGN = re.compile(r"[\\`*_{}\[\]<>()#!|~&$.+-]")


@dataclass(frozen=True)
class Part:
    """One Telegram message: text and its entities (UTF-16 offsets into ``text``)."""

    text: str
    entities: tuple[MessageEntity, ...]


def render(markdown: str, *, limit: int = TELEGRAM_LIMIT) -> list[Part]:
    """Convert the model's Markdown into sendable parts; [] only when there is nothing to show."""
    try:
        escaped = escape_html(_latex_to_math(markdown))
        text, raw = telegramify_markdown.convert(escaped, latex_escape=False)
    except Exception:  # a converter bug must not lose the answer
        log.exception("markdown conversion failed; sending plain text")
        return [Part(t, ()) for t in plain_parts(markdown, limit=limit)]
    if not text.strip():
        return [Part(t, ()) for t in plain_parts(markdown, limit=limit)]
    text, raw = _surface_hidden(text, raw)
    idx = _Utf16Index(text)
    spans = [
        (idx.to_py(e.offset), idx.to_py(e.offset + e.length), e)
        for e in sorted(raw, key=lambda e: e.offset)
        if e.length > 0
    ]
    starts, ends = [s for s, _, _ in spans], [e for _, e, _ in spans]
    return [_make_part(text, idx, s, e, spans) for s, e in _chunks(text, idx, limit, starts, ends)]


def _surface_hidden(
    text: str, raw: list[telegramify_markdown.MessageEntity]
) -> tuple[str, list[telegramify_markdown.MessageEntity]]:
    """Put into the text what Telegram would not show: odd fence info strings, bad link URLs.

    The converter keeps a whole info string (```` ```py title="x" ````) as `language`, where
    Telegram shows only a plain name: it becomes the code's first line. A link target Telegram
    rejects (`[see](notes)`) loses its entity and follows its text as " (notes)".
    """
    edits: list[tuple[int, str, bool]] = []  # (UTF-16 offset, text to insert, inside an entity)
    keep: list[telegramify_markdown.MessageEntity] = []
    for e in raw:
        if e.type == "pre" and e.language and not _LANGUAGE.fullmatch(e.language):
            edits.append((e.offset, e.language.strip() + "\n", True))
            e.language = None
        elif e.type == "text_link" and _fix_url(e) is None:
            if e.url and e.url.strip():
                edits.append((e.offset + e.length, f" ({e.url.strip()})", False))
            continue
        keep.append(e)
    if not edits:
        return text, keep
    idx = _Utf16Index(text)
    for at, insert, inside in sorted(edits, key=lambda t: t[0], reverse=True):
        cut, grow = idx.to_py(at), utf16_len(insert)
        text = text[:cut] + insert + text[cut:]
        for e in keep:
            if e.offset > at or (e.offset == at and not inside):
                e.offset += grow
            elif e.offset + e.length > at:
                e.length += grow
    return text, keep


def markdown_text(text: str) -> str:
    """`text` on one line with every sign Markdown reads backslash-escaped, so `render`
    shows it as it is (a name such as `get_current_time` stays one word)."""
    line = " ".join(text.split())
    return _MARKDOWN_SIGN.sub(lambda found: "\\" + found.group(0), line)


def plain_parts(text: str, *, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Split text verbatim (no formatting) on paragraph, line, word, then character boundaries."""
    idx = _Utf16Index(text)
    return [text[s:e] for s, e in _chunks(text, idx, limit, [], [])]


def escape_html(markdown: str) -> str:
    """Backslash-escape `<`, `&` and `[` of `[](` outside code so the converter shows them.

    Autolinks (`<https://…>`) and characters the author already escaped are left alone. Code
    regions are found on a copy whose `<` are neutralised, so an HTML block swallowing a fence
    in the original cannot hide where the fence is once the `<` is escaped. A `<` opening a
    line inside a multi-line code span cannot be escaped (it would start an HTML block): that
    line break becomes a space, which is what the code span shows for it anyway.
    """
    data = markdown.encode("utf-8")
    targets = [m.start() for m in _HTMLISH.finditer(data) if len(m.group()) == 1]
    if not targets:
        return markdown
    probe = bytearray(data)
    for pos in targets:
        if probe[pos] == ord("<"):
            probe[pos] = ord("a")
    regions = _code_regions(probe.decode("utf-8"))
    starts = [r[0] for r in regions]
    out: list[bytes] = []
    cursor = 0
    for pos in targets:
        i = bisect.bisect_right(starts, pos) - 1
        head, insert = pos, b"\\"
        if i >= 0 and regions[i][0] <= pos < regions[i][1]:
            line_start = data.rfind(b"\n", 0, pos) + 1
            if not (
                regions[i][2]
                and data[pos] == ord("<")
                and line_start > regions[i][0]
                and _LINE_LEAD.fullmatch(data, line_start, pos)
            ):
                continue
            # join the line to the previous one: a code span reads a line break as a space
            head, insert = line_start - 1, b" "
        out += (data[cursor:head], insert)
        cursor = pos
    out.append(data[cursor:])
    return b"".join(out).decode("utf-8")


def _code_regions(text: str) -> list[tuple[int, int, bool]]:
    """UTF-8 byte ranges the parser treats as code or math, and whether each is a code span."""
    regions: list[tuple[int, int, bool]] = []
    source = text.encode("utf-8")
    for payload, rng in pyromark.events_with_range(text, options=_OPTIONS):
        if not isinstance(payload, dict):
            continue
        start, end = rng["start"], rng["end"]
        block = payload.get("Start")
        if isinstance(block, dict) and "CodeBlock" in block:
            regions.append((start, end, False))
        elif "Code" in payload:
            regions.append((start, end, True))
        elif any(k in payload for k in _MATH_EVENTS) and not source[end : end + 1].isdigit():
            # math closed right before a digit is read as prices by the converter: not code
            regions.append((start, end, False))
    regions.sort()
    return regions


class _Utf16Index:
    """Maps Python string indices to UTF-16 offsets and back, cheaply when text is all BMP."""

    def __init__(self, text: str) -> None:
        self.astral = [m.start() for m in _ASTRAL.finditer(text)]
        # UTF-16 offset of each astral character's first code unit
        self.astral16 = [p + k for k, p in enumerate(self.astral)]

    def to_u16(self, py: int) -> int:
        return py + bisect.bisect_left(self.astral, py) if self.astral else py

    def to_py(self, u16: int) -> int:
        """Python index of the character at `u16`, rounding down from inside a surrogate pair."""
        if not self.astral:
            return u16
        k = bisect.bisect_right(self.astral16, u16 - 2)  # astral characters ending by u16
        inside_pair = k < len(self.astral16) and self.astral16[k] == u16 - 1
        return u16 - k - inside_pair


def _chunks(
    text: str, idx: _Utf16Index, limit: int, ent_starts: list[int], ent_ends: list[int]
) -> list[tuple[int, int]]:
    """Python ranges of the parts: trimmed, non-blank, ≤ limit UTF-16 units, ≤ 100 entities."""
    if limit < 2:
        raise ValueError("limit must leave room for a surrogate pair")
    ranges: list[tuple[int, int]] = []
    start, n = 0, len(text)
    while True:
        while start < n and text[start].isspace():
            start += 1
        if start >= n:
            return ranges
        hard = min(n, idx.to_py(idx.to_u16(start) + limit))
        hard = min(hard, _entity_cap(start, ent_starts, ent_ends))
        end = n if hard >= n else _best_break(text, start, hard)
        stop = end
        while stop > start and text[stop - 1].isspace():
            stop -= 1
        if stop > start:
            ranges.append((start, stop))
        start = end


def _entity_cap(start: int, ent_starts: list[int], ent_ends: list[int]) -> int:
    """End a part before its 101st entity begins, unless that would leave it empty."""
    live = 0
    for s, e in zip(ent_starts, ent_ends, strict=True):  # sorted by start
        if e <= start:
            continue
        live += 1
        if live > MAX_ENTITIES and s > start:
            return s
    return 1 << 62


def _best_break(text: str, start: int, hard: int) -> int:
    """Where to end a part within text[start:hard]: paragraph, line, word, else `hard`."""
    half = start + (hard - start) // 2
    for floor in (half, start + 1):
        for sep in ("\n\n", "\n", " "):
            cut = text.rfind(sep, floor, hard)
            if cut != -1:
                return cut + len(sep)
    return hard  # a Python index never falls inside a surrogate pair


SOURCE_LABEL_CHARS = 60
"""A source without a title is shown as its URL, cut to this many characters."""


def sources_parts(
    heading: str, sources: Sequence[Source], *, limit: int = TELEGRAM_LIMIT
) -> list[Part]:
    """The numbered list of `sources` under a bold `heading`, as messages of their own.

    Each line reads "[n] title" (the `[n]` the answer cites); the title, or a short form
    of the URL, links to the source when it is an http(s) URL and is plain text otherwise.
    Titles are text, never Markdown, so nothing in them is interpreted. Lines are packed
    into as few parts as fit `limit` UTF-16 units and `MAX_ENTITIES` entities; the heading
    opens the first. A caller joins the first part to the answer when both fit.
    """
    lines = []
    for source in sources:
        label = source.title or _short_url(source.url)
        lines.append(_Line(f"[{source.index}] ", label, source.url if source.is_web_link else None))
    return _listed_parts(heading, lines, limit)


def knowledge_parts(
    heading: str,
    sources: Sequence[KnowledgeSource],
    page: Callable[[int], str],
    *,
    limit: int = TELEGRAM_LIMIT,
) -> list[Part]:
    """The knowledge-base passages an answer cites under a bold `heading`, one a line:
    "[K1] title › heading path, page 3" (`page` words the page number), packed as
    `sources_parts` packs its lines. Every text is plain text, never Markdown."""
    lines = []
    for source in sources:
        where = source.title + (f" › {source.section}" if source.section else "")
        if source.page is not None:
            where += ", " + page(source.page)
        lines.append(_Line(f"[{source.ref}] ", where, None))
    return _listed_parts(heading, lines, limit)


def tools_parts(heading: str, lines: Sequence[str], *, limit: int = TELEGRAM_LIMIT) -> list[Part]:
    """The tools a reply used under a bold `heading`, one a line ("time · get_current_time
    (timezone=UTC)", worded by the caller), packed as `sources_parts` packs its lines.
    Every line is plain text, never Markdown."""
    return _listed_parts(heading, [_Line("", line, None) for line in lines], limit)


@dataclass(frozen=True, slots=True)
class _Line:
    """A line of a list under a heading: its prefix, then its label (a link to `url`)."""

    prefix: str
    label: str
    url: str | None


def _listed_parts(heading: str, lines: Sequence[_Line], limit: int) -> list[Part]:
    """`lines` under a bold `heading`, packed into as few parts as fit."""
    if not lines:
        return []
    parts: list[Part] = []
    text, entities = heading, [MessageEntity(MessageEntity.BOLD, 0, utf16_len(heading))]
    for entry in lines:
        line = entry.prefix + entry.label
        if utf16_len(text) + 1 + utf16_len(line) > limit or len(entities) >= MAX_ENTITIES:
            parts.append(Part(text, tuple(entities)))
            text, entities = "", []
        if text:
            text += "\n"
        if entry.url is not None:
            offset = utf16_len(text + entry.prefix)
            link = MessageEntity(
                MessageEntity.TEXT_LINK, offset, utf16_len(entry.label), url=entry.url
            )
            entities.append(link)
        text += line
    parts.append(Part(text, tuple(entities)))
    return parts


def _short_url(url: str) -> str:
    """The URL without its scheme (for http(s)), cut to `SOURCE_LABEL_CHARS` with "…"."""
    try:
        web = urlsplit(url).scheme.lower() in {"http", "https"}
    except ValueError:
        web = False
    shown = url.split("://", 1)[-1] if web else url
    if len(shown) > SOURCE_LABEL_CHARS:
        shown = shown[: SOURCE_LABEL_CHARS - 1] + "…"
    return shown


def _make_part(
    text: str,
    idx: _Utf16Index,
    start: int,
    end: int,
    spans: list[tuple[int, int, telegramify_markdown.MessageEntity]],
) -> Part:
    """Cut text[start:end] and clip, shift, and cap the entities that overlap it."""
    base, top = idx.to_u16(start), idx.to_u16(end)
    out: list[MessageEntity] = []
    for s, e, ent in spans:  # sorted by start
        if s >= end:
            break
        if e <= start:
            continue
        if len(out) == MAX_ENTITIES:  # only when >100 entities all cover one point: drop the rest
            break
        lo, hi = max(ent.offset, base), min(ent.offset + ent.length, top)
        out.append(
            MessageEntity(
                type=ent.type,
                offset=lo - base,
                length=hi - lo,
                url=_fix_url(ent) if ent.type == "text_link" else None,
                language=ent.language,
                custom_emoji_id=ent.custom_emoji_id,
            )
        )
    return Part(text[start:end], tuple(out))


def _fix_url(ent: telegramify_markdown.MessageEntity) -> str | None:
    """A URL Telegram accepts for a text link, or None."""
    url = (ent.url or "").strip()
    if _SCHEME.match(url):
        return url
    if _BARE_DOMAIN.fullmatch(url):
        return "https://" + url
    return None
