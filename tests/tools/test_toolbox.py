"""The toolbox against the fake MCP server, over stdio and over streamable HTTP: what the
model is offered, and what each call gives back (answers, refusals, timeouts, cut
results, tool errors), each bounded in time and size.

One fake per transport serves the whole module (each test leaves it as it found it);
the tests of a server dying or failing to start are in test_server_lifecycle.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from core.domain.tools import TOOL_NAME, ToolCall, ToolFailure
from fakes.mcp_server import MEGABYTE, ORDERS, PIXEL
from tests.mcp_harness import fake_http, fake_stdio, running_toolbox
from tools.toolbox import McpToolbox

pytestmark = pytest.mark.asyncio(loop_scope="module")

CALL_SECONDS = 3.0  # long enough for an echo on a loaded machine, short for a test
MAX_CHARS = 500
FAKE_TOOLS = ["echo", "hang", "big", "fail", "die", "orders", "picture", "look_up"]


@pytest_asyncio.fixture(loop_scope="module", scope="module", params=["stdio", "http"])
async def toolbox(request: pytest.FixtureRequest) -> AsyncIterator[McpToolbox]:
    """A toolbox whose one server, `fake`, is the fake over the transport of the param."""
    if request.param == "stdio":
        async with running_toolbox(
            {"fake": fake_stdio(FAKE_MCP_PREFIX="fake says: ")},
            call_seconds=CALL_SECONDS,
            max_chars=MAX_CHARS,
        ) as toolbox:
            yield toolbox
        return
    async with (
        fake_http() as (url, _),
        running_toolbox(
            {"fake": {"url": url, "headers": {"Authorization": "Bearer test"}}},
            call_seconds=CALL_SECONDS,
            max_chars=MAX_CHARS,
        ) as toolbox,
    ):
        yield toolbox


def call(name: str, arguments: str = "{}") -> ToolCall:
    return ToolCall(id="call_1", name=name, arguments=arguments)


async def test_every_tool_is_offered_under_a_name_the_model_may_call(
    toolbox: McpToolbox,
) -> None:
    specs = {spec.name: spec for spec in toolbox.specs()}
    assert list(specs) == [f"fake__{tool}" for tool in FAKE_TOOLS]
    assert all(TOOL_NAME.fullmatch(name) for name in specs)
    echo = specs["fake__echo"]
    assert (echo.server, echo.tool, echo.description) == ("fake", "echo", "Say the text back.")
    assert echo.parameters["required"] == ["text"]
    assert echo.as_openai()["function"]["parameters"]["properties"]["text"]["type"] == "string"
    assert specs["fake__look_up"].tool == "look.up"  # sanitised for the model, not the server
    [status] = toolbox.statuses()
    assert (status.name, status.state, status.tools, status.error) == ("fake", "ready", 8, None)


async def test_a_call_answers_with_the_tools_text(toolbox: McpToolbox) -> None:
    use = await toolbox.call(call("fake__echo", '{"text": "hello"}'))
    assert use.ok
    assert (use.name, use.server, use.tool) == ("fake__echo", "fake", "echo")
    assert use.arguments == '{"text": "hello"}'
    assert use.result.endswith("hello")
    assert use.failure is None and use.ms >= 0


async def test_a_sanitised_name_calls_the_tool_by_its_own_name(toolbox: McpToolbox) -> None:
    use = await toolbox.call(call("fake__look_up", '{"query": "trains to Berlin"}'))
    assert (use.tool, use.result) == ("look.up", "looked up trains to Berlin")


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ('{"text": ', "invalid arguments: not JSON"),
        ("[1, 2]", "invalid arguments: must be a JSON object"),
        ('{"words": "hello"}', "invalid arguments: 'text' is a required property"),
        ('{"text": 42}', "invalid arguments: text: 42 is not of type 'string'"),
        ('{"text": "' + "x" * 30_000 + '"}', "invalid arguments: longer than 20000 characters"),
    ],
)
async def test_invalid_arguments_are_refused_before_the_server_sees_them(
    toolbox: McpToolbox, arguments: str, said: str
) -> None:
    use = await toolbox.call(call("fake__echo", arguments))
    assert use.failure is ToolFailure.INVALID_ARGUMENTS
    assert use.error is not None and use.error.startswith(said)
    assert len(use.error) < 300 and use.result == ""
    assert len(use.arguments) <= 2000  # what the transcript keeps is bounded


async def test_empty_arguments_are_an_empty_object(toolbox: McpToolbox) -> None:
    """Models often send "" for a tool without parameters."""
    use = await toolbox.call(call("fake__orders", ""))
    assert use.ok


async def test_an_unknown_tool_is_refused_by_name(toolbox: McpToolbox) -> None:
    use = await toolbox.call(call("fake__delete_everything"))
    assert use.failure is ToolFailure.UNKNOWN_TOOL
    assert use.error == "no tool named 'fake__delete_everything'; call one of the tools offered"
    long = await toolbox.call(call("x" * 10_000))
    assert long.failure is ToolFailure.UNKNOWN_TOOL and len(long.name) <= 64


@pytest.mark.timeout(20)
async def test_a_hanging_tool_times_out_while_another_call_on_the_server_answers(
    toolbox: McpToolbox,
) -> None:
    hanging = asyncio.create_task(toolbox.call(call("fake__hang")))
    answered = await toolbox.call(call("fake__echo", '{"text": "meanwhile"}'))
    assert answered.ok and answered.result.endswith("meanwhile")
    assert not hanging.done()  # the echo did not wait for the hanging call
    use = await hanging
    assert use.failure is ToolFailure.TIMEOUT
    assert use.error == f"timed out after {CALL_SECONDS:g} s"
    assert use.ms >= CALL_SECONDS * 1000 * 0.9
    after = await toolbox.call(call("fake__echo", '{"text": "after"}'))
    assert after.ok  # the session stays usable after the cancelled call


async def test_a_megabyte_result_is_cut_to_the_limit_with_a_marker(toolbox: McpToolbox) -> None:
    use = await toolbox.call(call("fake__big"))
    assert use.ok
    assert len(use.result) <= MAX_CHARS
    assert use.result.startswith("0123456789")
    assert use.result.endswith(
        f"[cut: the tool returned {MEGABYTE} characters; the first ones are shown]"
    )
    small = await toolbox.call(call("fake__big", '{"chars": 100}'))
    assert small.result == "0123456789" * 10  # under the limit: whole, no marker


async def test_a_tool_error_is_a_failure_carrying_the_tools_text(toolbox: McpToolbox) -> None:
    use = await toolbox.call(call("fake__fail"))
    assert use.failure is ToolFailure.FAILED
    assert use.error is not None and "the fake tool failed on purpose" in use.error
    assert use.result == ""


async def test_non_text_content_is_described_not_sent(toolbox: McpToolbox) -> None:
    use = await toolbox.call(call("fake__picture"))
    assert use.result.splitlines() == [
        f"[image: image/png, {len(PIXEL)} bytes, not shown]",
        "a one-pixel picture",
    ]


async def test_a_result_that_gives_orders_is_returned_as_data(toolbox: McpToolbox) -> None:
    """What the result says is for the model to weigh, never acted on here."""
    use = await toolbox.call(call("fake__orders"))
    assert use.ok and use.result == ORDERS


async def test_parallel_calls_on_one_server_each_get_their_own_answer(
    toolbox: McpToolbox,
) -> None:
    uses = await asyncio.gather(
        *(toolbox.call(call("fake__echo", json.dumps({"text": f"n{i}"}))) for i in range(8))
    )
    assert [use.result.rsplit(" ", 1)[-1] for use in uses] == [f"n{i}" for i in range(8)]
