"""The early-finish marker: a model ending a consultation before its last round says so.

Invariants: the marker counts only at the very start of a reply (after some whitespace,
optionally bold or in backticks), exactly as `early_finish.mustache` asks the model to
write it; anywhere else, or in another letter case, it is the model's text (a user may ask
about it). While a reply is streamed the marker may arrive split across deltas ("[[FI"
then "NAL]]"), so while the start of the reply could still grow into it nothing is shown;
once that is decided, the rest of the reply is shown as it grows, whatever it contains.
Deciding looks at a bounded prefix only, so a feed costs the same however long the reply
is (besides the slice it forwards).
"""

from __future__ import annotations

import re

from core.domain.ports import OnText

EARLY_FINISH_MARKER = "[[FINAL]]"

# The marker as the prompt defines it, or wrapped the way models often echo formatting.
_MARKER_FORMS = (f"**{EARLY_FINISH_MARKER}**", f"`{EARLY_FINISH_MARKER}`", EARLY_FINISH_MARKER)
_MARKER_LEAD = 32  # whitespace tolerated before the marker
_MARKER_RE = re.compile(
    rf"\A\s{{0,{_MARKER_LEAD}}}(?:{'|'.join(map(re.escape, _MARKER_FORMS))})\s*"
)
_MARKER_HEAD = _MARKER_LEAD + max(map(len, _MARKER_FORMS))


def marker_end(text: str) -> int | None:
    """Where the reply proper starts after a leading early-finish marker (None: no marker).

    Only the exact marker counts, at the very start (after some whitespace), optionally
    wrapped in ``**`` or backticks; the whitespace after it belongs to the marker. Other
    letter cases and later occurrences are the model's text: a user may ask about it.
    """
    match = _MARKER_RE.match(text)
    return match.end() if match else None


def strip_marker(text: str) -> tuple[str, bool]:
    """Remove a leading early-finish marker (see `marker_end`); report whether there was one."""
    end = marker_end(text)
    return (text, False) if end is None else (text[end:], True)


def marker_pending(text: str) -> bool:
    """Whether `text`, the start of a reply, may still grow into a leading marker.

    Looks at a bounded prefix only, so it costs the same however long `text` is.
    """
    head = text[: _MARKER_HEAD + 1]
    start = head.lstrip()
    if len(head) - len(start) > _MARKER_LEAD:
        return False
    return any(form.startswith(start) for form in _MARKER_FORMS)


def visible_text(text: str) -> str:
    """The part of streamed `text` that is safe to show now."""
    if marker_pending(text):
        return ""
    end = marker_end(text)
    return text if end is None else text[end:]


class MarkerFilter:
    """Wraps an `on_text` callback; forwards only growth of the visible text."""

    def __init__(self, on_text: OnText) -> None:
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
