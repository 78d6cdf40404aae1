"""Progress text for a reply being streamed, with a leading early-finish marker hidden.

The marker counts only at the very start of a reply (`core.prompts.marker_end`). It
may arrive split across deltas ("[[FI" then "NAL]]"), so while the start of the reply
could still grow into it nothing is shown; once that is decided, the rest of the reply
is shown as it grows, whatever it contains. Deciding looks at a bounded prefix only,
so a feed costs the same however long the reply is (besides the slice it forwards).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from core.prompts import marker_end, marker_pending


def visible_text(text: str) -> str:
    """The part of streamed `text` that is safe to show now."""
    if marker_pending(text):
        return ""
    end = marker_end(text)
    return text if end is None else text[end:]


class MarkerFilter:
    """Wraps an `on_text` callback; forwards only growth of the visible text."""

    def __init__(self, on_text: Callable[[str], Awaitable[None]]) -> None:
        self._on_text = on_text
        self._last = ""
        self._hidden: int | None = None  # characters hidden at the start, once decided

    async def feed(self, text: str) -> None:
        if self._hidden is None:
            if marker_pending(text):
                return
            end = marker_end(text) or 0
            if end == len(text):
                return  # the marker and whitespace so far: more whitespace may follow
            self._hidden = end
        shown = text[self._hidden :] if self._hidden else text
        if shown and shown != self._last:  # unequal lengths compare in O(1)
            self._last = shown
            await self._on_text(shown)
