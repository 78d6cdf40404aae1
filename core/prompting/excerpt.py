"""Shortening one long text to its beginning and end, so a single message cannot make a
model request unbounded.

Invariant: `split_excerpt(text, limit, note_chars)` keeps `text` whole when it fits
`limit`; otherwise head + tail + `note_chars` (the room the caller's note and separators
take) is at most `limit`, head and tail are a prefix and a suffix of `text`, and
`omitted` is exactly the number of characters between them. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

SEPARATOR = "\n\n"
HEAD_SHARE = 2 / 3
"""Most of the room goes to the beginning: requests state their question first."""


@dataclass(frozen=True, slots=True)
class Excerpt:
    head: str
    omitted: int  # characters left out between head and tail; 0: `head` is the whole text
    tail: str = ""


def split_excerpt(text: str, limit: int, note_chars: int) -> Excerpt:
    """`text` whole if it fits `limit`, else its beginning and end with room for a note."""
    if len(text) <= limit:
        return Excerpt(text, 0)
    room = max(limit - note_chars, 0)
    head = int(room * HEAD_SHARE)
    tail = room - head
    return Excerpt(text[:head], len(text) - head - tail, text[len(text) - tail :] if tail else "")


def excerpt(text: str, limit: int, note: Callable[[int], str]) -> str:
    """`text`, or its beginning and end around `note(omitted)`, in at most `limit` characters
    (when `limit` leaves room for the note at all)."""
    # The note for len(text) is at least as long as for any smaller count.
    cut = split_excerpt(text, limit, len(note(len(text))) + 2 * len(SEPARATOR))
    if not cut.omitted:
        return cut.head
    return SEPARATOR.join((cut.head, note(cut.omitted), cut.tail))
