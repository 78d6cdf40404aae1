"""What a server lists is not trusted: a tool the model could not be offered safely is
left out (a schema that is no JSON Schema, one too large to send with every call, a name
that collides once sanitised), a long description is cut, and each is logged once."""

from __future__ import annotations

import logging

import pytest

from core.domain.tools import ToolCall, ToolFailure
from tests.mcp_harness import fake_stdio, running_toolbox
from tests.waiting import until


@pytest.mark.timeout(30)
async def test_tools_that_cannot_be_offered_are_left_out_once_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tools")
    async with running_toolbox({"fake": fake_stdio(FAKE_MCP_HOSTILE="1")}) as toolbox:
        specs = {spec.name: spec for spec in toolbox.specs()}
        assert "fake__bad_schema" not in specs and "fake__huge_schema" not in specs
        assert specs["fake__a_b"].tool == "a.b"  # the first to claim the name keeps it
        assert len(specs["fake__wordy"].description) == 1024
        assert toolbox.statuses()[0].tools == len(specs) == 10
        refused = await toolbox.call(ToolCall(id="c", name="fake__bad_schema", arguments="{}"))
        assert refused.failure is ToolFailure.UNKNOWN_TOOL

        await toolbox.call(ToolCall(id="c", name="fake__die", arguments="{}"))
        await until(lambda: toolbox.statuses()[0].state == "ready", "the fake started again")
        assert {spec.name for spec in toolbox.specs()} == set(specs)

    told = [r.getMessage() for r in caplog.records if r.name == "tools.toolbox"]
    assert sorted(told) == [
        "tool server fake: tool 'a.b' offered to the model as fake__a_b",
        "tool server fake: tool 'a_b' left out: its name cannot be made a unique tool name",
        "tool server fake: tool 'bad_schema' left out: its input schema is invalid or too large",
        "tool server fake: tool 'huge_schema' left out: its input schema is invalid or too large",
        "tool server fake: tool 'look.up' offered to the model as fake__look_up",
    ]
