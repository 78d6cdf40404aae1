"""Tools at the model client (`core.llm.llm`, `core.llm.llm_stream`, `core.llm.llm_errors`):
the body offering them, streamed `tool_calls` joined whatever the server's habit, bounds on
what a server may stream, and refusals read as TOOLS_REFUSED. The real openai SDK against
the fake model server."""

from __future__ import annotations

import json

import pytest

from core.domain.errors import ModelError, ModelErrorKind
from core.domain.ports import CompletionRequest
from core.domain.tools import ToolCall
from core.llm.llm import OpenAICompleter
from core.llm.llm_errors import tools_refused
from core.llm.llm_stream import MAX_ARGUMENT_CHARS, MAX_TOOL_CALLS
from fakes.model_server import TOOL_ERRORS, FakeModelServer, ScriptedCall
from tests.toolboxes import CLOCK, SLOW

MESSAGES = [{"role": "user", "content": "What time is it?"}]
OFFERING = CompletionRequest(messages=MESSAGES, model="m", tools=(CLOCK, SLOW))
PLAIN = CompletionRequest(messages=MESSAGES, model="m")


def _raw(delta: object) -> bytes:
    chunk = {"id": "x", "object": "chat.completion.chunk", "model": "m"}
    choice = {"index": 0, "delta": {"tool_calls": delta}, "finish_reason": None}
    return b"data: " + json.dumps({**chunk, "choices": [choice]}).encode() + b"\n\n"


@pytest.mark.parametrize("style", ["openai", "whole", "no_index"])
async def test_two_calls_are_joined_whatever_the_servers_habit(
    completer: OpenAICompleter, model_server: FakeModelServer, style: str
) -> None:
    """OpenAI's deltas (index, id and name first, arguments in 3-character pieces),
    llama.cpp's whole calls, and deltas without an index give the same two calls."""
    model_server.enqueue_calls(
        ScriptedCall(CLOCK.name, '{"tz": "Europe/Riga"}', "c1"),
        ScriptedCall(SLOW.name, "{}", "c2"),
        style=style,
        chunk_size=3,
    )
    completion = await completer.complete(OFFERING)
    assert completion.tool_calls == (
        ToolCall("c1", CLOCK.name, '{"tz": "Europe/Riga"}'),
        ToolCall("c2", SLOW.name, "{}"),
    )
    assert completion.finish_reason == "tool_calls" and completion.text == ""
    (body,) = model_server.requests
    assert body["tools"] == [CLOCK.as_openai(), SLOW.as_openai()]
    assert body["tool_choice"] == "auto"


async def test_a_request_without_tools_sends_none_and_reads_none(
    completer: OpenAICompleter, model_server: FakeModelServer
) -> None:
    model_server.enqueue_calls(ScriptedCall(CLOCK.name, "{}"), text="Noon.")
    completion = await completer.complete(PLAIN)
    assert completion.tool_calls == () and completion.text == "Noon."
    assert "tools" not in model_server.requests[0]
    assert "tool_choice" not in model_server.requests[0]


async def test_arguments_sent_as_an_object_and_a_missing_id_are_taken(
    completer: OpenAICompleter, model_server: FakeModelServer
) -> None:
    delta = [{"index": 0, "function": {"name": CLOCK.name, "arguments": {"tz": "UTC"}}}]
    model_server.enqueue(raw_events=[_raw(delta)])
    completion = await completer.complete(OFFERING)
    assert completion.tool_calls == (ToolCall("call_0", CLOCK.name, '{"tz": "UTC"}'),)


@pytest.mark.parametrize(
    "delta",
    [
        "not a list",
        ["not an object"],
        [{"index": "zero", "function": {"name": "clock__now"}}],
        [{"index": 0, "function": {"name": 5}}],
        [{"index": 0, "id": "c", "function": {"arguments": "{}"}}],  # never named
    ],
)
async def test_a_malformed_tool_call_is_a_malformed_stream(
    completer: OpenAICompleter, model_server: FakeModelServer, delta: object
) -> None:
    model_server.enqueue(raw_events=[_raw(delta)])
    with pytest.raises(ModelError, match="malformed stream") as info:
        await completer.complete(OFFERING)
    assert info.value.kind is ModelErrorKind.UNAVAILABLE


async def test_a_reply_keeps_at_most_max_tool_calls_and_max_argument_chars(
    completer: OpenAICompleter, model_server: FakeModelServer
) -> None:
    """Forty calls, the first with arguments past the bound: sixteen are kept, and the
    arguments stop at the bound (no JSON any more, so that tool is not run)."""
    long = json.dumps({"tz": "x" * (MAX_ARGUMENT_CHARS + 5000)})
    calls = [ScriptedCall(CLOCK.name, long, "c0")]
    calls += [ScriptedCall(CLOCK.name, "{}", f"c{n}") for n in range(1, 40)]
    model_server.enqueue_calls(*calls, style="whole")
    completion = await completer.complete(OFFERING)
    assert len(completion.tool_calls) == MAX_TOOL_CALLS
    assert len(completion.tool_calls[0].arguments) == MAX_ARGUMENT_CHARS
    assert all(call.arguments == "" for call in completion.tool_calls[1:])


@pytest.mark.parametrize("server", sorted(TOOL_ERRORS))
async def test_a_refusal_of_tools_is_tools_refused(
    completer: OpenAICompleter, model_server: FakeModelServer, server: str
) -> None:
    model_server.refuse_tools = server
    with pytest.raises(ModelError) as info:
        await completer.complete(OFFERING)
    assert info.value.kind is ModelErrorKind.TOOLS_REFUSED


async def test_a_request_without_tools_is_never_tools_refused(
    completer: OpenAICompleter, model_server: FakeModelServer
) -> None:
    model_server.enqueue("'tools' is not supported with this model.", status=400)
    with pytest.raises(ModelError) as info:
        await completer.complete(PLAIN)
    assert info.value.kind is ModelErrorKind.REJECTED


@pytest.mark.parametrize(
    ("status", "message", "refused"),
    [
        (404, "No endpoints found that support tool use", True),
        (400, "This model does not support function calling", True),
        (400, "tool_choice is not supported", True),
        (400, "maximum context length is 8192 tokens; the tools took 9000", False),
        (500, "tools param requires --jinja flag", False),  # an outage, retried
        (400, "temperature must be at most 2", False),
        (400, "stool samples", False),
    ],
)
def test_which_words_refuse_tools(status: int, message: str, refused: bool) -> None:
    assert tools_refused(status, message) is refused
