"""Which language a conversation is written in, when a cheap look can tell.

Invariant: `written_language` answers only when the evidence is plain — "ru" for text
mostly in Cyrillic without the letters of other Cyrillic languages, "en" for text mostly
in Latin letters with frequent English function words — and None otherwise (German,
Ukrainian, code, a few words), so a caller never names a language it merely guessed.
It reads a bounded sample (the last `SAMPLE_CHARS` characters), whatever the length.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SAMPLE_CHARS = 4000
LANGUAGE_NAMES = {"en": "English", "ru": "Russian"}
"""Codes `written_language` returns, with the names the prompts use for them."""

_CYRILLIC = re.compile(r"[а-яё]")
_NOT_RUSSIAN = re.compile(r"[іїєґўђјљњћџѓќѕ]")  # Ukrainian, Belarusian, Serbian, Macedonian
_LATIN = re.compile(r"[a-z]")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_ENGLISH_WORDS = frozenset(
    ("the", "and", "is", "are", "was", "were", "to", "of", "my", "you", "your", "what", "how",
     "why", "with", "for", "it", "this", "that", "i", "i'm", "do", "does", "can", "could",
     "should", "would", "we", "have", "has", "be", "not", "there", "their", "which", "about",
     "from", "will")
)  # fmt: skip
_MIN_ENGLISH_SHARE = 0.15  # of words; English prose runs at 0.3-0.5
_MAX_FOREIGN_SHARE = 0.02  # of Cyrillic letters: a quoted word may carry a few


def written_language(texts: Iterable[str]) -> str | None:
    """The code of the language `texts` (oldest first) are written in, or None (see above)."""
    sample = _tail(texts).lower()
    cyrillic = len(_CYRILLIC.findall(sample))
    foreign = len(_NOT_RUSSIAN.findall(sample))
    latin = len(_LATIN.findall(sample))
    if cyrillic + foreign > latin:
        return "ru" if foreign <= _MAX_FOREIGN_SHARE * (cyrillic + foreign) else None
    words = _WORD.findall(sample)
    if len(words) < 3:
        return None
    common = sum(word in _ENGLISH_WORDS for word in words)
    return "en" if common >= _MIN_ENGLISH_SHARE * len(words) else None


def language_name(code: str | None) -> str | None:
    """The English name of a code `written_language` returns (None for None)."""
    return LANGUAGE_NAMES.get(code) if code is not None else None


def _tail(texts: Iterable[str]) -> str:
    """The last `SAMPLE_CHARS` characters of the texts joined, newest last."""
    kept: list[str] = []
    size = 0
    for text in reversed(list(texts)):
        kept.append(text[-(SAMPLE_CHARS - size) :])
        size += len(kept[-1])
        if size >= SAMPLE_CHARS:
            break
    return "\n".join(reversed(kept))
