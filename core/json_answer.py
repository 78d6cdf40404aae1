"""Reading a final answer asked for as JSON: its code fence removed, parsed or repaired.

Invariants: `json_valid` is True only for text that parses as JSON as given (then the
text is kept as the model wrote it, fence and outer whitespace aside) or that
`json_repair` turned into a value (then the text is that value re-serialised, `repaired`
True); when nothing can be salvaged the text is returned without its fence, no value.
Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any

from json_repair import repair_json

_OPEN_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*[ \t]*\n?")
_CLOSE_FENCE = re.compile(r"\n?```\s*$")


def drop_open_fence(fragment: str) -> str:
    """`fragment` without a code fence opening it (a continuation restating ```json)."""
    return _OPEN_FENCE.sub("", fragment, count=1)


def strip_fences(text: str) -> str:
    """Remove a Markdown code fence (```json … ```) around a JSON answer."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = _CLOSE_FENCE.sub("", _OPEN_FENCE.sub("", stripped, count=1), count=1)
    return stripped.strip()


def parse_json_answer(text: str) -> tuple[str, Any, bool, bool]:
    """(text, value, valid, repaired): parse, or repair with json_repair when broken."""
    text = strip_fences(text)
    try:
        return text, json.loads(text), True, False
    except json.JSONDecodeError:
        pass
    value = repair_json(text, return_objects=True)
    if value == "" and text.strip() not in ('""', "''"):
        return text, None, False, False  # json_repair's answer for "nothing salvageable"
    return json.dumps(value, ensure_ascii=False), value, True, True
