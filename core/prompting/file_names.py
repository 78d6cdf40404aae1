"""File names for a consultation's documents, made from its title.

Invariant: a name holds only letters and digits (of any script, or ASCII alone for
`ascii_stem`), spaces, `_`, `-` and inner dots: never a path separator, a control
character, a leading dot or a trailing space, so it names one plain file wherever it is
saved. A title that leaves nothing gives `FALLBACK`.
"""

from __future__ import annotations

import re

MAX_STEM_CHARS = 59
"""A stem and its extension (`.docx`, `.md`) fit in 64 characters."""
FALLBACK = "consultation"
_NOT_ASCII_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NOT_SAFE = re.compile(r"[^\w .-]+")
_SPACES = re.compile(r"\s+")


def ascii_stem(title: str, max_chars: int = MAX_STEM_CHARS) -> str:
    """A file name stem from a title: ASCII letters, digits, `.`, `_` and `-` only."""
    stem = _NOT_ASCII_SAFE.sub("_", title).strip("._-")[:max_chars].strip("._-")
    return stem or FALLBACK


def readable_stem(title: str, max_chars: int = MAX_STEM_CHARS) -> str:
    """A file name stem that keeps the title readable in any script: letters, digits and
    single spaces kept, other signs dropped; `ascii_stem` when nothing is left."""
    kept = _SPACES.sub(" ", _NOT_SAFE.sub("", title)).strip(" .-_")
    kept = kept[:max_chars].strip(" .-_")
    return kept or ascii_stem(title, max_chars)
