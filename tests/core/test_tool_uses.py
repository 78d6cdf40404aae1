"""A reply's tool uses as shown and stored (`core.domain.tool_uses`): arguments shortened
to one bounded line whatever the model wrote, the stored form read back exactly, and
anything else read as no tool uses."""

from __future__ import annotations

import json

import pytest

from core.domain.tool_uses import (
    ARGUMENT_CHARS,
    ARGUMENTS_CHARS,
    short_arguments,
    used_line,
    uses_from_json,
    uses_to_json,
)
from core.domain.tools import ToolFailure, ToolUse


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ('{"timezone": "Europe/Paris"}', "timezone=Europe/Paris"),
        (
            '{"q": "a\\nb", "n": 3, "on": true, "tags": ["x", "y"]}',
            'q=a b, n=3, on=true, tags=["x","y"]',
        ),
        ("{}", ""),
        ("", ""),
        ("  ", ""),
        ("not json {", "not json {"),
        ("[1, 2]", "[1, 2]"),
        ('"just text"', '"just text"'),
    ],
)
def test_arguments_are_shown_as_name_equals_value(arguments: str, shown: str) -> None:
    assert short_arguments(arguments) == shown


def test_long_and_deep_arguments_stay_one_bounded_line() -> None:
    """Each argument cut to ARGUMENT_CHARS, all of them to ARGUMENTS_CHARS; a nesting deep
    enough to exhaust the parser is shown as text, cut the same."""
    many = json.dumps({f"k{n}": "v" * 500 for n in range(50)})
    line = short_arguments(many)
    assert len(line) == ARGUMENTS_CHARS and line.endswith("…") and "\n" not in line
    assert short_arguments(json.dumps({"q": "x" * 1000})) == "q=" + "x" * (ARGUMENT_CHARS - 3) + "…"
    deep = "[" * 100_000 + "]" * 100_000
    assert len(short_arguments(deep)) <= ARGUMENTS_CHARS


def test_a_use_line_names_server_and_tool_or_the_called_name() -> None:
    use = ToolUse("time__now", "time", "now", '{"tz": "UTC"}')
    assert used_line(use) == "time · now (tz=UTC)"
    assert used_line(ToolUse("invented", "", "", "{}")) == "invented"


def test_the_stored_form_reads_back_exactly_and_damage_reads_as_none() -> None:
    uses = (
        ToolUse("a__b", "a", "b", '{"x": "\\u0000"}', "r\x00«»😀", None, None, 3),
        ToolUse("a__c", "a", "c", "{}", "", "gone", ToolFailure.UNAVAILABLE, 20_000),
    )
    stored = uses_to_json(uses)
    assert stored is not None and uses_from_json(stored) == uses
    assert uses_to_json(()) is None and uses_from_json(None) == ()
    for damaged in ("", "{", "null", "1", '{"name": "x"}', "[1]", '[{"tool": "no name"}]'):
        assert uses_from_json(damaged) == ()
    assert uses_from_json("[" * 100_000) == ()
