"""Progress text for a reply being streamed, with the early-finish marker hidden.

The marker may arrive split across deltas ("[[FI" then "NAL]]"); a trailing piece
that could still grow into the marker is held back until it is decided, so the
user never sees a fragment of it flash by.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from core.prompts import EARLY_FINISH_MARKER, strip_marker


def visible_text(text: str, marker: str = EARLY_FINISH_MARKER) -> str:
    """The part of streamed `text` that is safe to show now."""
    shown, _ = strip_marker(text)
    for size in range(len(marker) - 1, 0, -1):
        if shown.endswith(marker[:size]):
            return shown[:-size]
    return shown


class MarkerFilter:
    """Wraps an `on_text` callback; forwards only growth of the visible text."""

    def __init__(self, on_text: Callable[[str], Awaitable[None]]) -> None:
        self._on_text = on_text
        self._last = ""

    async def feed(self, text: str) -> None:
        shown = visible_text(text)
        if shown and shown != self._last:
            self._last = shown
            await self._on_text(shown)
