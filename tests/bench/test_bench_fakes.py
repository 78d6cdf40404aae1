"""The benchmark's fake model (`bench/fakes.py BenchModel`) through the real openai SDK:
in its ordinary mode a clarifying round asked for as JSON gets one, as the product's
structured rounds need; in its slow mode a client that does not stream (the minimal
relay) gets the slow reply whole, and its first token is still recorded; the requests
are counted by the response format they asked for."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from bench.fakes import SLOW_WORDS, BenchModel
from core.domain.clarifying import ROUND_SCHEMA, SCHEMA_NAME

ROUND_FORMAT: Any = {
    "type": "json_schema",
    "json_schema": {"name": SCHEMA_NAME, "schema": ROUND_SCHEMA, "strict": True},
}


@pytest.fixture
async def model() -> AsyncIterator[BenchModel]:
    server = BenchModel()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def client(model: BenchModel) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(api_key="bench", base_url=model.base_url, max_retries=0) as sdk:
        yield sdk


async def test_a_clarifying_round_asked_as_json_is_answered_as_one(
    client: AsyncOpenAI,
) -> None:
    """The product's structured rounds get a round's JSON, streamed or whole; a call with no
    response format gets the echo in text."""
    asked: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "which payment provider?"}
    ]
    whole = await client.chat.completions.create(
        model="m", messages=asked, response_format=ROUND_FORMAT
    )
    stream = await client.chat.completions.create(
        model="m", messages=asked, response_format=ROUND_FORMAT, stream=True
    )
    streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    plain = await client.chat.completions.create(model="m", messages=asked)

    for text in (whole.choices[0].message.content or "", streamed):
        assert json.loads(text) == {
            "preamble": "",
            "questions": [{"text": "Reply to: which payment provider?", "options": []}],
            "ready_for_final": False,
        }
    assert plain.choices[0].message.content == "Reply to: which payment provider?"


async def test_in_slow_mode_a_call_that_does_not_stream_gets_the_reply_whole(
    model: BenchModel, client: AsyncOpenAI
) -> None:
    """The slow reply's twenty words arrive in one completion, and the moment its first word
    was written is recorded for the user's message, as for a streamed call."""
    model.stream_seconds = 0.1
    asked: list[ChatCompletionMessageParam] = [{"role": "user", "content": "slow one"}]
    whole = await client.chat.completions.create(model="m", messages=asked)
    as_round = await client.chat.completions.create(
        model="m", messages=asked, response_format=ROUND_FORMAT
    )

    assert whole.choices[0].message.content == "".join(SLOW_WORDS)
    assert json.loads(as_round.choices[0].message.content or "") == {
        "preamble": "".join(SLOW_WORDS),
        "questions": [{"text": "Which one?", "options": []}],
        "ready_for_final": False,
    }
    assert [first["user"] for first in model.first_tokens] == ["slow one", "slow one"]


async def test_requests_are_counted_by_the_format_they_asked_for(
    model: BenchModel, client: AsyncOpenAI
) -> None:
    """`GET /_bench/formats?since=I` counts the requests from index I on."""
    asked: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]
    await client.chat.completions.create(model="m", messages=asked)
    await client.chat.completions.create(model="m", messages=asked, response_format=ROUND_FORMAT)
    await client.chat.completions.create(model="m", messages=asked, response_format=ROUND_FORMAT)
    url = f"http://127.0.0.1:{model.port}/_bench/formats"
    async with aiohttp.ClientSession() as http:
        async with http.get(url) as response:
            every = await response.json()
        async with http.get(url, params={"since": 1}) as response:
            later = await response.json()
    assert every == {"next": 3, "formats": {"none": 1, SCHEMA_NAME: 2}}
    assert later == {"next": 3, "formats": {SCHEMA_NAME: 2}}


async def test_in_tool_mode_the_model_calls_the_offered_tool_once_a_question(
    model: BenchModel, client: AsyncOpenAI
) -> None:
    """With `tool_call` set, a request offering that tool gets a call of it with the mode's
    arguments; once the result is in the messages, the answer; a request not offering it
    is answered at once."""
    model.tool_call, model.tool_arguments = "tools__wait", '{"ms": 20}'
    tool: Any = {"type": "function", "function": {"name": "tools__wait", "parameters": {}}}
    asked: list[ChatCompletionMessageParam] = [{"role": "user", "content": "what time?"}]
    stream = await client.chat.completions.create(
        model="m", messages=asked, tools=[tool], stream=True
    )
    calls = [c.choices[0].delta.tool_calls async for c in stream if c.choices]
    called = [call.function for delta in calls if delta for call in delta if call.function]
    name = "".join(f.name or "" for f in called)
    arguments = "".join(f.arguments or "" for f in called)  # streamed in pieces, as OpenAI does
    assert (name, arguments) == ("tools__wait", '{"ms": 20}')
    answered: list[ChatCompletionMessageParam] = [
        *asked,
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "tools__wait", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "waited 20 ms"},
    ]
    after = await client.chat.completions.create(model="m", messages=answered, tools=[tool])
    without = await client.chat.completions.create(model="m", messages=asked)
    assert not after.choices[0].message.tool_calls and after.choices[0].message.content
    assert without.choices[0].message.content == "Reply to: what time?"
