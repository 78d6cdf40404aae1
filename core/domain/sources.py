"""The sources a search-backed provider cites, from the raw fields of its reply.

Perplexity sends, as top-level fields of its stream chunks, `citations` (a list of URLs)
and/or `search_results` (a list of `{title, url, date}`), and its answer cites them by
position: `[1]` is the first entry. `core.llm.llm` keeps such fields in `Reply.extras`; this
module turns them into what every edge (Telegram, terminal, HTTP API) shows.

Invariants: `extract_sources` is pure and total — any shape of `extras` gives a tuple,
never an error; each source keeps the number the answer cites it by (its position in the
provider's list, malformed entries counted), sources are ordered by that number and each
URL appears once, under the first number naming it; at most `MAX_SOURCES` are returned,
a URL is a single token of at most `MAX_URL_CHARS` (a longer one is dropped, since a cut
URL leads nowhere) and a title is one line of at most `MAX_TITLE_CHARS`. Only the first
`SCAN_LIMIT` entries of each list are read, so a huge reply costs no more than a small one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MAX_SOURCES = 20
MAX_URL_CHARS = 2048
MAX_TITLE_CHARS = 150
SCAN_LIMIT = 100

_SPACE = re.compile(r"\s+")
_INVISIBLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\ufeff]")
_BAD_URL_CHAR = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:.")


@dataclass(frozen=True, slots=True)
class Source:
    """One cited source: the answer's `[index]` refers to it."""

    index: int
    url: str
    title: str | None = None

    @property
    def is_web_link(self) -> bool:
        """An http(s) URL with a host: the only kind an edge turns into a link."""
        try:
            parts = urlsplit(self.url)
        except ValueError:
            return False
        return parts.scheme.lower() in {"http", "https"} and bool(parts.hostname)


def extract_sources(extras: Mapping[str, Any]) -> tuple[Source, ...]:
    """The provider's sources in the order the answer numbers them (see the module doc).

    `citations` decides the numbering when it holds any usable URL (entries may also be
    `{url, title}` objects); titles come from `search_results` entries with the same URL.
    Without usable citations, `search_results` are the sources, numbered in their order.
    """
    results = _entries(extras.get("search_results"), bare_urls=False)
    titles: dict[str, str] = {}
    for url, title in results:
        if url is not None and title is not None:
            titles.setdefault(url, title)
    entries = _entries(extras.get("citations"), bare_urls=True)
    if not any(url is not None for url, _ in entries):
        entries = results
    sources: list[Source] = []
    seen: set[str] = set()
    for position, (url, title) in enumerate(entries, start=1):
        if url is None or url in seen:
            continue
        seen.add(url)
        sources.append(Source(position, url, title or titles.get(url)))
        if len(sources) == MAX_SOURCES:
            break
    return tuple(sources)


def _entries(value: Any, *, bare_urls: bool) -> list[tuple[str | None, str | None]]:
    """(url, title) of each of the first `SCAN_LIMIT` entries; None where unusable.

    Entries are `{url, title}` objects, or (with `bare_urls`) URL strings.
    """
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        return []
    entries: list[tuple[str | None, str | None]] = []
    for item in value[:SCAN_LIMIT]:
        if isinstance(item, Mapping):
            entries.append((_url(item.get("url")), _title(item.get("title"))))
        else:
            entries.append((_url(item) if bare_urls else None, None))
    return entries


def _url(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    url = value.strip()
    if len(url) > MAX_URL_CHARS or _BAD_URL_CHAR.search(url) or not _SCHEME.match(url):
        return None
    return url


def _title(value: Any) -> str | None:
    """One line of visible text, cut at `MAX_TITLE_CHARS` (with "…"); None when blank."""
    if not isinstance(value, str):
        return None
    title = _SPACE.sub(" ", _INVISIBLE.sub(" ", value[: MAX_TITLE_CHARS * 4])).strip()
    if len(title) > MAX_TITLE_CHARS:
        title = title[: MAX_TITLE_CHARS - 1].rstrip() + "…"
    return title or None
