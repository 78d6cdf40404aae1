"""Telling a model stuck in a loop from an answer that repeats itself on purpose.

A degenerate loop is the end of the text repeating one unit back to back: a unit of at
least `LONG_UNIT` characters (a paragraph) three times or more, or a shorter unit (a
line, a phrase) over at least `SHORT_RUN` characters. A real answer repeats table rows,
list items or separators far less than that, and rarely exactly.

Invariants: `find_loop` looks at the last `WINDOW` characters only and compares with
string methods (C speed), a bounded number of times, so one look costs O(`WINDOW`);
`RepetitionGuard` looks once per `CHECK_EVERY` characters of growth, so watching a stream
costs O(1) amortised per delta however long the answer grows. Pure: no I/O.
"""

from __future__ import annotations

LONG_UNIT = 200
"""A unit this long repeated `MIN_REPEATS` times back to back is a loop."""

MIN_REPEATS = 3

SHORT_RUN = 1600
"""A shorter unit is a loop once its repetitions cover this many characters (for
example a 40-character line 40 times): identical table rows or list items in a real
answer stay well below it."""

WINDOW = 8192
"""Characters looked at: units up to a third of it (2,730 characters) are found."""

CHECK_EVERY = 512
"""Characters of growth between two looks at a stream."""

NEEDLE = 32
"""The end of the text searched for further back: each earlier occurrence is a
candidate period."""

_SENTENCE_END = frozenset(".!?…")

MAX_CANDIDATES = 64
"""Candidate periods tried per look, nearest first: bounds a look's cost on text that
repeats short pieces often without looping (the next look starts from other text)."""


def find_loop(text: str) -> int | None:
    """How many characters to cut from the end of `text` so that a loop ending it is
    left with its first occurrence only; None when `text` does not end in a loop."""
    tail = text[-WINDOW:]
    size = len(tail)
    if size < MIN_REPEATS * NEEDLE:
        return None
    needle = tail[-NEEDLE:]
    end = size - 1  # occurrences of the needle must end before the text's own last character
    shorter: list[tuple[int, int]] = []  # (period, whole-unit run) of nearer repetitions
    for _ in range(MAX_CANDIDATES):
        found = tail.rfind(needle, 0, end)
        if found == -1:
            return None
        period = size - NEEDLE - found
        end = found + NEEDLE - 1
        if any(period % q == 0 and run >= MIN_REPEATS * period for q, run in shorter):
            continue  # a multiple of a shorter unit: that unit's rule decides (rows, items)
        blocks = _blocks(tail, period)
        if blocks > 1:
            shorter.append((period, blocks * period))
        if blocks < MIN_REPEATS or (period < LONG_UNIT and (blocks + 1) * period <= SHORT_RUN):
            continue  # not a loop, even with a partial unit before the whole ones
        run = _extend(tail, period, blocks * period)
        if period >= LONG_UNIT or run >= SHORT_RUN:
            return _to_sentence_end(tail, run - period)
    return None


def _to_sentence_end(tail: str, cut: int) -> int:
    """`cut` less the punctuation that ends the kept occurrence's sentence (the loop may
    have started a character or two before its unit does)."""
    while cut > 0 and tail[len(tail) - cut] in _SENTENCE_END:
        cut -= 1
    return cut


def _blocks(tail: str, period: int) -> int:
    """How many whole units of `period` characters end `tail`, back to back."""
    size = len(tail)
    unit = tail[size - period :]
    blocks = 1
    while (blocks + 1) * period <= size and (
        tail[size - (blocks + 1) * period : size - blocks * period] == unit
    ):
        blocks += 1
    return blocks


def _extend(tail: str, period: int, run: int) -> int:
    """The repeating suffix `run` grown by the partial unit before it (a loop need not
    start at a unit's start): fewer than `period` steps."""
    size = len(tail)
    while run < size and tail[size - run - 1] == tail[size - run - 1 + period]:
        run += 1
    return run


class RepetitionGuard:
    """Watches a stream for a loop, looking once per `CHECK_EVERY` characters.

    `before` is the text the stream continues (a continuation's answer so far), so a
    loop across the seam is seen too.
    """

    def __init__(self, before: str = "") -> None:
        self._tail = before[-WINDOW:]
        self._pieces: list[str] = []
        self._pending = 0

    def add(self, piece: str) -> int | None:
        """Take one delta; when the text now ends in a loop, how many characters to cut."""
        self._pieces.append(piece)
        self._pending += len(piece)
        if self._pending < CHECK_EVERY:
            return None
        self._tail = (self._tail + "".join(self._pieces))[-WINDOW:]
        self._pieces.clear()
        self._pending = 0
        return find_loop(self._tail)
