"""The JSON Schema a client gave for its final answer (`outputSchema`): usable or not, met or not.

Invariant: only a JSON object that is itself a valid JSON Schema is treated as a schema —
sent to the model as `response_format: json_schema` and checked against the answer.
Anything else (a description in words, a malformed schema) stays what it always was, a
hint in the prompt, and no answer is judged against it. jsonschema is imported on the
first schema given: most deployments never see one, and it costs a few MB.
"""

from __future__ import annotations

import json
from typing import Any


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
