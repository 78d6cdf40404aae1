"""Stored text made safe to look at: characters that would reorder or hide what an
operator reads are shown by name.

Invariant: the result holds no bidirectional override, embedding or isolate (U+202A–202E,
U+2066–2069), no directional mark (U+200E, U+200F, U+061C) and no control character
but tab and line breaks; each one removed is shown as `[U+XXXX]`, so a transcript reads
in its stored order and a spoofed file name or link text shows what it hides. Escaping
for HTML is the templates' job (autoescape), not this module's.
"""

from __future__ import annotations

import re

_HIDDEN = re.compile(
    "[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]"
)


def reveal(text: str) -> str:
    return _HIDDEN.sub(lambda m: f"[U+{ord(m.group(0)):04X}]", text)
