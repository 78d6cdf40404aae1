"""The events of a model's stream: `EventData` splits them as the openai SDK's own decoder
does, however the bytes are cut, and a call reads what follows `[DONE]` only briefly."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from openai._streaming import SSEDecoder

from core.domain.ports import CompletionRequest
from core.llm.llm import OpenAICompleter
from core.llm.llm_stream import DRAIN_SECONDS, EventData
from tests.wires import wire_for

STREAMS = {
    "one event": b'data: {"a": 1}\n\n',
    "two events": b'data: {"a": 1}\n\ndata: {"b": 2}\n\n',
    "CRLF": b'data: {"a": 1}\r\n\r\ndata: [DONE]\r\n\r\n',
    "CR": b"data: one\r\rdata: two\r\r",
    "CR CR LF": b"data: x\r\r\ndata: y\n\n",
    "multi-line data": b"data: first\ndata: second\ndata:\n\n",
    "no space after the colon": b"data:tight\n\n",
    "two spaces after the colon": b"data:  spaced\n\n",
    "comments and keep-alives": b": keep-alive\n\n: ping\ndata: x\n\n",
    "a named event without data": b"event: ping\n\ndata: y\n\n",
    "an empty event name": b"event:\n\ndata: z\n\n",
    "an id outlives its event": b"id: 7\ndata: a\n\n\n\ndata: b\n\n",
    "an empty id ends it": b"id: 7\n\nid:\n\n\ndata: c\n\n",
    "an id with a NUL is ignored": b"id: a\x00b\n\n\ndata: d\n\n",
    "retry": b"retry: 10\n\nretry: soon\n\ndata: e\n\n",
    "a field without a colon": b"data\n\nfield: ignored\ndata: f\n\n",
    "blank lines only": b"\n\n\n",
    "no final blank line": b"data: kept\n\ndata: never ends",
    "UTF-8": "data: чай ☕\n\n".encode(),
}


def reference(stream: bytes, cuts: list[int]) -> list[str]:
    """The data of each event the SDK's decoder yields for `stream` cut at `cuts`."""
    decoder = SSEDecoder()
    return [event.data for event in decoder.iter_bytes(iter(pieces(stream, cuts)))]


def ours(stream: bytes, cuts: list[int]) -> list[str]:
    events = EventData()
    found = [data for piece in pieces(stream, cuts) for data in events.feed(piece)]
    events.finish()
    return found


def pieces(stream: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(edges)]


@pytest.mark.parametrize("stream", STREAMS.values(), ids=STREAMS.keys())
def test_events_are_the_sdks_however_the_bytes_are_cut(stream: bytes) -> None:
    """Whole, cut once at every position, and byte by byte: the same events as the SDK's."""
    assert ours(stream, []) == reference(stream, [])
    for cut in range(1, len(stream)):
        assert ours(stream, [cut]) == reference(stream, [cut]), cut
    every = list(range(1, len(stream)))
    assert ours(stream, every) == reference(stream, every)


def test_a_line_that_is_not_utf8_is_a_decoding_error() -> None:
    """Bytes that are not UTF-8 fail like the SDK's decoding (a ValueError)."""
    with pytest.raises(UnicodeDecodeError):
        EventData().feed(b"data: \xff\xfe\n\n")
    with pytest.raises(UnicodeDecodeError):
        reference(b"data: \xff\xfe\n\n", [])


def test_a_long_line_in_small_pieces_is_read_once() -> None:
    """A 200,000-character data line fed 4 bytes at a time arrives whole, as one event."""
    line = b"data: " + b"x" * 200_000
    events = EventData()
    found: list[str] = []
    for start in range(0, len(line), 4):
        found += events.feed(line[start : start + 4])
    found += events.feed(b"\n\n")
    assert found == ["x" * 200_000]


async def test_a_server_holding_the_stream_open_after_done_is_left() -> None:
    """After `[DONE]` the rest of the body is read only briefly: a server that never
    ends the response does not hold the call, whose answer is complete."""
    released = asyncio.Event()

    async def completions(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunk = {"choices": [{"index": 0, "delta": {"content": "Tea."}, "finish_reason": "stop"}]}
        await response.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        await released.wait()  # the body never ends while the call is made
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    async with TestServer(app, host="127.0.0.1") as server:
        for transport in ("aiohttp", "httpx"):
            completer = OpenAICompleter(
                api_key="k",
                base_url=str(server.make_url("/v1")),
                timeout=30.0,
                max_retries=0,
                wire=wire_for(transport, 30.0),
            )
            try:
                request = CompletionRequest([{"role": "user", "content": "Tea?"}], "m")
                call = completer.complete(request)
                result = await asyncio.wait_for(call, 100 * DRAIN_SECONDS)
            finally:
                await completer.close()
            assert (result.text, result.finish_reason) == ("Tea.", "stop")
        released.set()


async def test_chunks_after_done_are_not_read_as_the_answer() -> None:
    """Whatever a server sends after `[DONE]`, even text that is no event, is not the answer."""

    async def completions(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunk = {"choices": [{"index": 0, "delta": {"content": "Tea."}, "finish_reason": "stop"}]}
        late = {"choices": [{"index": 0, "delta": {"content": " Coffee."}}]}
        await response.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        await response.write(f"data: {json.dumps(late)}\n\ndata: \xff\n\n".encode("latin-1"))
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    async with TestServer(app, host="127.0.0.1") as server:
        completer = OpenAICompleter(
            api_key="k", base_url=str(server.make_url("/v1")), timeout=5.0, max_retries=0
        )
        seen: list[str] = []

        async def on_delta(piece: str) -> None:
            seen.append(piece)

        try:
            result = await completer.complete(CompletionRequest([], "m"), on_delta)
        finally:
            await completer.close()
    assert (result.text, seen) == ("Tea.", ["Tea."])
