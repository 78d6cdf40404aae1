"""What counts as an empty message: nothing a reader could see.

Whitespace is not enough: zero-width spaces and joiners, the word joiner, a byte
order mark, soft hyphens and the other Unicode format characters (category Cf),
variation selectors and the blank "filler" letters some apps send all render as
nothing. A message made only of them is refused like an empty one, so it is never
stored and never sent to the model.
"""

from __future__ import annotations

import unicodedata

_INVISIBLE = frozenset(
    "\u034f"  # combining grapheme joiner
    "\u115f\u1160\u3164\uffa0"  # Hangul fillers
    "\u2800"  # braille pattern blank
    "\u180e"  # Mongolian vowel separator (formerly a space)
    + "".join(chr(code) for code in range(0xFE00, 0xFE10))  # variation selectors
)


def is_invisible(char: str) -> bool:
    """Whether one character shows nothing on its own."""
    return char.isspace() or char in _INVISIBLE or unicodedata.category(char) == "Cf"


def is_blank(text: str) -> bool:
    """Whether `text` has no visible character at all."""
    return all(is_invisible(char) for char in text)
