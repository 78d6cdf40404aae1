"""A final answer asked for as JSON: the client's schema for it, and the answer read.

Invariants:
- only a JSON object that is itself a valid JSON Schema is treated as the client's schema
  (`outputSchema`) — sent to the model as `response_format: json_schema` and checked
  against the answer; anything else (a description in words, a malformed schema) stays
  what it always was, a hint in the prompt, and no answer is judged against it;
- `json_valid` is True only for text that parses as JSON as given (then the text is kept
  as the model wrote it, fence and outer whitespace aside) or that `json_repair` turned
  into a value (then the text is that value re-serialised, `repaired` True); when nothing
  can be salvaged the text is returned without its fence, no value.
Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any

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
    from json_repair import repair_json  # only for broken JSON: not held by every process

    value = repair_json(text, return_objects=True)
    if value == "" and text.strip() not in ('""', "''"):
        return text, None, False, False  # json_repair's answer for "nothing salvageable"
    return json.dumps(value, ensure_ascii=False), value, True, True


def schema_object(text: str | None) -> dict[str, Any] | None:
    """The schema in `text` when it is a valid JSON Schema object, else None."""
    if not text:
        return None
    try:
        schema = json.loads(text)
    except ValueError:
        return None
    if not isinstance(schema, dict):
        return None
    from jsonschema import Draft202012Validator, SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError:
        return None
    return schema


def follows_schema(value: Any, schema: dict[str, Any]) -> bool:
    """Whether the parsed answer `value` is valid under `schema` (formats not asserted)."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    validator = validator_for(schema, default=Draft202012Validator)(schema)
    return bool(validator.is_valid(value))
