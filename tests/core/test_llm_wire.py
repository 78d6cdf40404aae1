"""Chat completions on both paths (the aiohttp wire, production's; the openai SDK) against
the fake OpenAI-compatible server: the SDK's retry rule as a server steers it, a body cut
mid-answer, a costly error body, a reader that stops early, a proxy from the environment."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from core.domain.errors import ModelError, ModelErrorKind
from core.domain.ports import CompletionRequest
from core.llm.llm import OpenAICompleter
from fakes.model_server import FakeModelServer
from tests.wires import Transport, wire_for

USER = [{"role": "user", "content": "How do I brew tea?"}]
CHUNK = b'data: {"choices": [{"index": 0, "delta": {"content": "%s"}}]}\n\n'


@pytest.fixture(params=["httpx", "aiohttp"])
def transport(request: pytest.FixtureRequest) -> Transport:
    """Every behaviour holds on both paths: the wire (production's) and the SDK."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
async def retrying(
    model_server: FakeModelServer, transport: Transport
) -> AsyncIterator[OpenAICompleter]:
    """A completer with the SDK's default two retries."""
    completer = OpenAICompleter(
        api_key="k",
        base_url=model_server.base_url,
        timeout=5,
        max_retries=2,
        wire=wire_for(transport, 5),
    )
    yield completer
    await completer.close()


async def test_a_server_asking_for_a_wait_over_two_minutes_is_not_asked_again(
    model_server: FakeModelServer, retrying: OpenAICompleter
) -> None:
    """A 429 asking for a ten-minute wait fails at once as rate-limited."""
    model_server.enqueue("slow down", status=429, headers={"retry-after-ms": "600000"})
    model_server.enqueue("never asked")

    with pytest.raises(ModelError) as caught:
        await retrying.complete(CompletionRequest(USER, "m"))

    assert caught.value.kind is ModelErrorKind.RATE_LIMITED
    assert "slow down" in caught.value.detail
    assert len(model_server.requests) == 1


async def test_a_server_wait_within_bounds_is_taken_and_the_call_asked_again(
    model_server: FakeModelServer, retrying: OpenAICompleter
) -> None:
    """A 429 with retry-after-ms is asked again, and the second answer is the call's."""
    model_server.enqueue("slow down", status=429, headers={"retry-after-ms": "20"})
    model_server.enqueue("Brewed.")

    result = await retrying.complete(CompletionRequest(USER, "m"))

    assert result.text == "Brewed."
    assert len(model_server.requests) == 2


async def test_x_should_retry_false_is_obeyed(
    model_server: FakeModelServer, retrying: OpenAICompleter
) -> None:
    """A 500 the server marks as not worth a retry is one request."""
    model_server.enqueue("broken for good", status=500, headers={"x-should-retry": "false"})

    with pytest.raises(ModelError) as caught:
        await retrying.complete(CompletionRequest(USER, "m"))

    assert caught.value.kind is ModelErrorKind.UNAVAILABLE
    assert len(model_server.requests) == 1


async def test_x_should_retry_true_retries_even_a_400(
    model_server: FakeModelServer, retrying: OpenAICompleter
) -> None:
    """A 400 the server marks as worth a retry is asked again."""
    model_server.enqueue("busy, try again", status=400, headers={"x-should-retry": "true"})
    model_server.enqueue("Brewed.")

    result = await retrying.complete(CompletionRequest(USER, "m"))

    assert result.text == "Brewed."
    assert len(model_server.requests) == 2


async def test_a_body_cut_mid_answer_is_unavailable_after_what_streamed(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A connection cut halfway through the body (no end of chunks) is a failure, never a
    short answer taken for a whole one; what streamed before reached the reader."""
    model_server.enqueue(raw_events=[CHUNK % b"Steep ", CHUNK % b"for "], break_off=True)
    seen: list[str] = []

    async def on_delta(piece: str) -> None:
        seen.append(piece)

    with pytest.raises(ModelError) as caught:
        await completer.complete(CompletionRequest(USER, "m"), on_delta)

    assert caught.value.kind is ModelErrorKind.UNAVAILABLE
    assert "".join(seen) == "Steep for "


async def test_a_huge_error_body_is_read_only_in_part(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A 400 with a 4 MB body costs a bounded read and a short error, and the pool serves
    the next call."""
    model_server.enqueue("x" * 4_000_000, status=400)
    model_server.enqueue("Brewed.")

    with pytest.raises(ModelError) as caught:
        await completer.complete(CompletionRequest(USER, "m"))

    assert caught.value.kind is ModelErrorKind.REJECTED
    assert len(str(caught.value)) < 70_000
    assert (await completer.complete(CompletionRequest(USER, "m"))).text == "Brewed."


async def test_a_reader_stopping_early_leaves_the_pool_usable(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A caller that stops reading an endless stream frees its connection; the next call
    is answered."""
    model_server.enqueue("tea ", endless=True, chunk_size=4)
    model_server.enqueue("Brewed.")

    class Enough(Exception):
        pass

    async def stop(piece: str) -> None:
        raise Enough

    with pytest.raises(Enough):
        await completer.complete(CompletionRequest(USER, "m"), stop)

    assert (await completer.complete(CompletionRequest(USER, "m"))).text == "Brewed."


async def test_a_proxy_from_the_environment_carries_the_calls(
    model_server: FakeModelServer,
    transport: Transport,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With HTTP_PROXY set (and NO_PROXY not naming the server), every call goes through
    the proxy, as the SDK's httpx sends it."""
    seen: list[str] = []

    async def forward(request: web.Request) -> web.StreamResponse:
        seen.append(f"{request.method} {request.url}")
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                request.method,
                str(request.url),
                data=await request.read(),
                headers={
                    "Content-Type": request.headers.get("Content-Type", "application/json"),
                    "Authorization": request.headers.get("Authorization", ""),
                },
            ) as upstream,
        ):
            response = web.StreamResponse(status=upstream.status)
            response.content_type = upstream.content_type
            await response.prepare(request)
            async for piece in upstream.content.iter_any():
                await response.write(piece)
            await response.write_eof()
            return response

    proxy = web.Application()
    proxy.router.add_route("*", "/{tail:.*}", forward)
    async with TestServer(proxy, host="127.0.0.1") as server:
        for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", str(server.make_url("")))
        monkeypatch.setenv("http_proxy", str(server.make_url("")))
        completer = OpenAICompleter(
            api_key="k",
            base_url=model_server.base_url,
            timeout=5,
            max_retries=0,
            wire=wire_for(transport, 5),
        )
        try:
            model_server.enqueue("Through the proxy.")
            result = await completer.complete(CompletionRequest(USER, "m"))
        finally:
            await completer.close()

    assert result.text == "Through the proxy."
    assert seen == [f"POST {model_server.base_url}/chat/completions"]
    await asyncio.sleep(0)
