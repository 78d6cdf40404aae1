"""The toolbox against `mcp-server-time` from PyPI, a server no one here wrote."""

from __future__ import annotations

import json

import pytest

from core.domain.tools import ToolCall, ToolFailure
from tests.mcp_harness import running_toolbox, time_server


@pytest.mark.timeout(30)
async def test_the_time_server_tells_the_time_and_refuses_what_its_schema_refuses() -> None:
    async with running_toolbox({"time": time_server()}, allow="time.get_*") as toolbox:
        [spec] = toolbox.specs()
        assert spec.name == "time__get_current_time"
        assert "timezone" in spec.parameters["required"]
        [status] = toolbox.statuses()
        assert (status.state, status.tools) == ("ready", 1)

        use = await toolbox.call(
            ToolCall(id="c1", name="time__get_current_time", arguments='{"timezone": "UTC"}')
        )
        assert use.ok, use.error
        answer = json.loads(use.result)
        assert answer["timezone"] == "UTC" and answer["datetime"].endswith("+00:00")

        missing = await toolbox.call(ToolCall(id="c2", name="time__get_current_time", arguments=""))
        assert missing.failure is ToolFailure.INVALID_ARGUMENTS
        assert missing.error == "invalid arguments: 'timezone' is a required property"

        unknown = await toolbox.call(
            ToolCall(id="c3", name="time__get_current_time", arguments='{"timezone": "Mars/Base"}')
        )
        assert unknown.failure is ToolFailure.FAILED
        assert unknown.error is not None and "Mars/Base" in unknown.error
