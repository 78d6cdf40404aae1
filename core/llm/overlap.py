"""Joining a continuation to the answer it continues without repeating their shared seam.

Invariants: the result is `accumulated` followed by `fragment` with at most the part it
repeats removed — nothing of `accumulated` is ever dropped, and of `fragment` only a
repeated seam, a restart's opening phrase (`core.llm.seams`) or, when it only repeats text
already there, all of it. Only the last `OVERLAP_WINDOW` characters are searched, so a
merge costs O(window), not O(answer). Comparison is by code points, so Cyrillic and emoji
are never split. Pure: no I/O.
"""

from __future__ import annotations

from core.llm.seams import drop_opener, join

MIN_OVERLAP = 4
"""Shorter seams are taken as coincidence: a model continuing exactly where it
stopped often starts with a letter or two the text happens to end with."""

OVERLAP_WINDOW = 4000
"""Only the last characters are searched: a model repeats its last lines, not pages."""


def _overlap(tail: str, fragment: str, min_overlap: int) -> int:
    """Length of the longest suffix of `tail` that is a prefix of `fragment` (0 if < min)."""
    if min(len(tail), len(fragment)) < min_overlap:
        return 0
    probe = fragment[:min_overlap]
    start = tail.find(probe)
    while start != -1:  # the first hit is the longest overlap; str methods keep it fast
        if fragment.startswith(tail[start:]):
            return len(tail) - start
        start = tail.find(probe, start + 1)
    return 0


def merge_with_overlap(
    accumulated: str,
    fragment: str,
    *,
    min_overlap: int = MIN_OVERLAP,
    window: int = OVERLAP_WINDOW,
) -> str:
    """Append `fragment` to `accumulated` without repeating what they share at the seam.

    Rules, in order:
    1. A fragment whose trimmed text (at least `min_overlap` characters) occurs in the
       last `window` characters adds nothing: the model repeated itself.
    2. The longest suffix of `accumulated` that is a prefix of `fragment` (at least
       `min_overlap` characters, within `window`) is not repeated.
    3. Failing that, the same is tried ignoring whitespace at the seam (the model
       often drops or adds the space or newline it stopped at).
    4. A fragment opening with a restart's phrase ("Sure! Here's the continuation:",
       `core.llm.seams`) loses the phrase, and rules 1–3 are tried on the rest.
    5. Otherwise the fragment is joined as is — a continuation may start mid-word — or,
       when it starts a new sentence or block after a word, after a space or a
       paragraph break (`core.llm.seams.join`).
    Comparison is by code points, so Cyrillic and emoji are never split.
    """
    if not fragment:
        return accumulated
    if not accumulated:
        return fragment
    merged = _merge_overlapping(accumulated, fragment, min_overlap, window)
    if merged is not None:
        return merged
    rest = drop_opener(fragment)
    if rest is not fragment:
        merged = _merge_overlapping(accumulated, rest, min_overlap, window)
        if merged is not None:
            return merged
    return join(accumulated, rest)


def _merge_overlapping(
    accumulated: str, fragment: str, min_overlap: int, window: int
) -> str | None:
    """Rules 1–3 of `merge_with_overlap`; None when the two do not overlap."""
    tail = accumulated[-window:]
    trimmed = fragment.strip()
    if len(trimmed) >= min_overlap and trimmed in tail:
        return accumulated
    head = fragment[:window]
    size = _overlap(tail, head, min_overlap)
    if size:
        return accumulated + fragment[size:]
    base, rest = accumulated.rstrip(), fragment.lstrip()
    if (base, rest) != (accumulated, fragment):
        size = _overlap(base[-window:], rest[:window], min_overlap)
        if size:
            return base + rest[size:]
    return None
