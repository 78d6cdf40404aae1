"""Text from bytes, and text cut to a budget.

Invariants: `decode_text` never fails (an undecodable byte becomes U+FFFD at worst) and
returns text with "\\n" line ends and no NUL; `share_budget` never hands out more than
the budget in total and gives a short text all of its length before a long one gets
more than an equal share; `cut` keeps a prefix, ending at a line or word boundary when
one is near the limit, and says exactly how many characters it dropped.
"""

from __future__ import annotations

import codecs
import re

_UNICODE_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16: its BOM starts the same way
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_WORD = re.compile(r"[^\W\d_]+")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_LATIN = re.compile(r"[A-Za-z]")
_ENCODING_SAMPLE = 100_000  # characters the cp1251 guess looks at: its words fill a list
_MAX_MIXED_SHARE = 0.2  # of the words with Cyrillic letters, for a cp1251 reading to win
BOUNDARY_WINDOW = 0.1  # how far back from the limit a cut may move to end at a boundary
_MIN_WINDOW = 40


def decode_text(data: bytes) -> str:
    """`data` as text: by its BOM, else UTF-8, else cp1251 when that reads as Cyrillic,
    else cp1252 (latin-1 for the bytes cp1252 leaves undefined)."""
    text = _decode(data)
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")


def _decode(data: bytes) -> str:
    for bom, encoding in _UNICODE_BOMS:
        if data.startswith(bom):
            return data.decode(encoding, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    cyrillic = data.decode("cp1251", errors="replace")
    if _reads_as_cyrillic(cyrillic[:_ENCODING_SAMPLE]):
        return cyrillic
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _reads_as_cyrillic(text: str) -> bool:
    """Russian read as cp1251 has whole Cyrillic words; Western text read so has its
    accented letters turned Cyrillic inside Latin words ("café" -> "cafй")."""
    words = [word for word in _WORD.findall(text) if _CYRILLIC.search(word)]
    mixed = sum(1 for word in words if _LATIN.search(word))
    return bool(words) and mixed <= _MAX_MIXED_SHARE * len(words)


def share_budget(lengths: list[int], budget: int) -> list[int]:
    """How many characters each text may keep when all share `budget`: each gets an equal
    share of what is left, and what a short text does not need goes to the longer ones."""
    allowed = [0] * len(lengths)
    left = max(0, budget)
    waiting = sorted(range(len(lengths)), key=lambda index: lengths[index])
    for position, index in enumerate(waiting):
        share = left // (len(waiting) - position)
        allowed[index] = min(lengths[index], share)
        left -= allowed[index]
    return allowed


def cut(text: str, limit: int) -> tuple[str, int]:
    """(the kept prefix, how many characters were dropped) for `text` cut to `limit`."""
    if len(text) <= limit:
        return text, 0
    window = max(_MIN_WINDOW, int(limit * BOUNDARY_WINDOW))
    head = text[: max(0, limit)]
    end = head.rfind("\n")
    if end < limit - window:
        end = max(head.rfind(" "), head.rfind("\t"))
    if end < limit - window or end <= 0:
        end = len(head)
    kept = head[:end].rstrip()
    return kept, len(text) - len(kept)
