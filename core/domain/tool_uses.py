"""The tools a reply used, as stored with it and as shown under it.

Invariants: `uses_to_json` and `uses_from_json` are the stored form of a reply's
`ToolUse`s (every field, in order); a stored value that does not read back (damaged, or
another shape) reads as no tool uses, never an error, and a failure name this version
does not know reads as `ToolFailure.FAILED`. The shown forms are pure and total: any
`ToolUse` gives one line of text, whatever its arguments hold (JSON or not), and each
argument is cut to `ARGUMENT_CHARS`, the whole list to `ARGUMENTS_CHARS`; a result shown
in a document is cut to `RESULT_CHARS`. Shown forms are text, not Markdown: an edge that
renders Markdown escapes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from core.domain.tools import ToolFailure, ToolUse

ARGUMENT_CHARS = 60
"""One argument as shown under an answer (`timezone=Europe/Paris`), at most."""
ARGUMENTS_CHARS = 120
"""All of a call's arguments as shown under an answer, at most."""
RESULT_CHARS = 2000
"""A result as a document shows it (the stored one is bounded by whoever ran the tool)."""
SERVER_TOOL = " · "
"""Between a tool's server and its own name where a person reads it."""

_SPACE = re.compile(r"\s+")


def server_tool(server: str, tool: str) -> str:
    """A tool as a person reads it: `time · get_current_time`."""
    return f"{server}{SERVER_TOOL}{tool}"


def shown_name(use: ToolUse) -> str:
    """`server · tool`, as a person reads which tool ran (`time · get_current_time`)."""
    if use.server and use.tool:
        return server_tool(use.server, use.tool)
    return use.name


def short_arguments(arguments: str) -> str:
    """A call's arguments on one line, each `name=value` cut to `ARGUMENT_CHARS`, the
    whole to `ARGUMENTS_CHARS`: `timezone=Europe/Paris, limit=3`. JSON that is no object
    (or no JSON) is shown as its text on one line, cut the same; `{}` shows nothing."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        pieces = [_cut(f"{key}={_value_text(item)}", ARGUMENT_CHARS) for key, item in value.items()]
        return _cut(", ".join(pieces), ARGUMENTS_CHARS)
    return _cut(arguments, ARGUMENTS_CHARS)


def used_line(use: ToolUse) -> str:
    """One tool use as listed under an answer: `time · get_current_time (timezone=UTC)`;
    without arguments, the name alone. Whether it failed is the caller's to mark."""
    arguments = short_arguments(use.arguments)
    return f"{shown_name(use)} ({arguments})" if arguments else shown_name(use)


def result_text(use: ToolUse) -> str:
    """What a document shows a tool gave: its result, cut to `RESULT_CHARS`, or its error."""
    if use.error is not None:
        return use.error
    return _cut_block(use.result, RESULT_CHARS)


def uses_to_json(uses: Sequence[ToolUse]) -> str | None:
    """The stored form of a reply's tool uses; None when it has none."""
    if not uses:
        return None
    return json.dumps(
        [
            {
                "name": u.name,
                "server": u.server,
                "tool": u.tool,
                "arguments": u.arguments,
                "result": u.result,
                "error": u.error,
                "failure": None if u.failure is None else u.failure.value,
                "ms": u.ms,
            }
            for u in uses
        ],
        ensure_ascii=False,
    )


def uses_from_json(text: str | None) -> tuple[ToolUse, ...]:
    """Stored tool uses; none for no value or a malformed one (never raises)."""
    if not text:
        return ()
    try:
        value = json.loads(text)
        if not isinstance(value, list):
            return ()
        return tuple(_use(item) for item in value)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return ()


def _use(item: Any) -> ToolUse:
    error = item.get("error")
    failure = item.get("failure")
    return ToolUse(
        name=str(item["name"]),
        server=str(item.get("server") or ""),
        tool=str(item.get("tool") or ""),
        arguments=str(item.get("arguments") or ""),
        result=str(item.get("result") or ""),
        error=None if error is None else str(error),
        failure=None if failure is None else _failure(str(failure)),
        ms=int(item.get("ms") or 0),
    )


def _failure(value: str) -> ToolFailure:
    try:
        return ToolFailure(value)
    except ValueError:  # written by a version that knew another kind
        return ToolFailure.FAILED


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _cut(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters (with "…")."""
    line = _SPACE.sub(" ", text[: limit * 4]).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _cut_block(text: str, limit: int) -> str:
    """`text` as it is, at most `limit` characters (with "…")."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
