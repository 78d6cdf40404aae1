"""The knowledge-base passages an answer cites, as shown under it and stored with it.

A model call is given passages labelled by their position, `K1` for the first
(`core.prompting.excerpts`); its answer cites them as `[K1]` (or `[K1, K3]`). Invariants:
`cited_sources` is pure and total — any text gives a tuple, never an error; it lists
only labels the text cites that name a passage the call was given (an invented `[K9]`
with three passages is dropped, an uncited passage is not listed), each once, in label
order; a source's title and section are one line each, its snippet one line of at most
`SNIPPET_CHARS`. `sources_to_json` and `sources_from_json` are the stored form; a stored
value that does not read back (damaged, or another shape) reads as no sources, never an
error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.domain.knowledge import Passage

LABEL_PREFIX = "K"
SNIPPET_CHARS = 200
"""A source's snippet: the start of its passage, enough to recognise it."""

_CITATION = re.compile(r"\[((?:\s*K\d{1,3}\s*[,;]?)+)\]")
_LABEL = re.compile(r"K(\d{1,3})")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class KnowledgeSource:
    """A passage an answer cited: `ref` is the label it cites (`K1`)."""

    ref: str
    document_id: int
    title: str
    section: str
    page: int | None
    snippet: str


def label(position: int) -> str:
    """The label of the passage at `position` (1-based) of a call's passages: `K1`…"""
    return f"{LABEL_PREFIX}{position}"


def one_line(text: str) -> str:
    """`text` with every run of whitespace (line breaks too) as one space, trimmed."""
    return _SPACE.sub(" ", text).strip()


def snippet_of(text: str) -> str:
    """The start of `text` on one line, cut at a word within `SNIPPET_CHARS` (with "…")."""
    line = one_line(text[: SNIPPET_CHARS * 4])
    if len(line) <= SNIPPET_CHARS:
        return line
    cut = line[: SNIPPET_CHARS - 1]
    if " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:") + "…"


def source_of(passage: Passage, position: int) -> KnowledgeSource:
    """The passage at `position` (1-based) as a source."""
    return KnowledgeSource(
        ref=label(position),
        document_id=passage.document_id,
        title=one_line(passage.title),
        section=one_line(passage.heading_path),
        page=passage.page,
        snippet=snippet_of(passage.text),
    )


def cited_labels(text: str) -> set[int]:
    """The label numbers `text` cites in square brackets (`[K2]`, `[K1, K3]`)."""
    return {
        int(number)
        for group in _CITATION.finditer(text)
        for number in _LABEL.findall(group.group(1))
    }


def cited_sources(text: str, passages: Sequence[Passage]) -> tuple[KnowledgeSource, ...]:
    """The passages `text` cites, as sources in label order (see the module)."""
    if not passages:
        return ()
    cited = cited_labels(text)
    return tuple(
        source_of(passage, position)
        for position, passage in enumerate(passages, 1)
        if position in cited
    )


def sources_to_json(sources: Sequence[KnowledgeSource]) -> str | None:
    """The stored form of a reply's sources; None when it has none."""
    if not sources:
        return None
    return json.dumps(
        [
            {
                "ref": s.ref,
                "document_id": s.document_id,
                "title": s.title,
                "section": s.section,
                "page": s.page,
                "snippet": s.snippet,
            }
            for s in sources
        ],
        ensure_ascii=False,
    )


def sources_from_json(text: str | None) -> tuple[KnowledgeSource, ...]:
    """Stored sources; none for no value or a malformed one (never raises)."""
    if not text:
        return ()
    try:
        value = json.loads(text)
        return tuple(_source(item) for item in value)
    except (ValueError, TypeError, KeyError, RecursionError):
        return ()


def _source(item: Any) -> KnowledgeSource:
    page = item.get("page")
    return KnowledgeSource(
        ref=str(item["ref"]),
        document_id=int(item["document_id"]),
        title=str(item["title"]),
        section=str(item.get("section") or ""),
        page=None if page is None else int(page),
        snippet=str(item.get("snippet") or ""),
    )
