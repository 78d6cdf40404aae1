"""A slow client cannot hold a connection: the request's headers and its body each have a
deadline in all (HTTP_HEADER_TIMEOUT_SECONDS, HTTP_BODY_TIMEOUT_SECONDS), not per byte.

Raw sockets against the real server on 127.0.0.1 (the production runner); the deadlines
are made short, and each test asserts that the server closed the connection, never when.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.api.test_api_webhook import SECRET, settings_for, telegram_app
from tests.api_harness import RunningApi, running_api

SECONDS = 0.5
TRICKLES = 200  # at 0.05 s apart: ten seconds, twenty times the deadline


@pytest.fixture
async def api(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> AsyncIterator[RunningApi]:
    """The API and the webhook on one server, with short deadlines."""
    settings = settings_for(
        tmp_path,
        bot_api,
        model_server,
        http_header_timeout_seconds=SECONDS,
        http_body_timeout_seconds=SECONDS,
    )
    async with running_api(settings, telegram=telegram_app) as running:
        yield running


async def connect(api: RunningApi) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    port = api.client.port
    assert port is not None
    return await asyncio.open_connection("127.0.0.1", port)


async def read_response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One response of `Content-Length` framing: its status line and its body."""
    status = await asyncio.wait_for(reader.readline(), 10)
    length = 0
    while (line := await asyncio.wait_for(reader.readline(), 10)) != b"\r\n":
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return status, await asyncio.wait_for(reader.readexactly(length), 10)


async def trickle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pieces: list[bytes]
) -> bool:
    """Send `pieces` 0.05 s apart; True once the server closed the connection."""
    for piece in pieces:
        try:
            writer.write(piece)
            await writer.drain()
            if await asyncio.wait_for(reader.read(65536), 0.05) == b"":
                return True
        except TimeoutError:
            continue
        except ConnectionError:
            return True
    return False


async def test_headers_sent_a_byte_at_a_time_are_cut_off(api: RunningApi) -> None:
    reader, writer = await connect(api)
    pieces = [b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "] + [b"a"] * TRICKLES
    try:
        assert await trickle(reader, writer, pieces), "the connection is still open"
    finally:
        writer.close()


async def test_the_next_request_s_headers_have_their_own_deadline_on_a_kept_alive_connection(
    api: RunningApi,
) -> None:
    """One honest request answered, then the next one's headers trickled a byte at a
    time on the same connection: the header deadline starts again, and cuts it off."""
    reader, writer = await connect(api)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        status, _ = await read_response(reader)
        assert status.startswith((b"HTTP/1.1 200", b"HTTP/1.1 503")), status
        pieces = [b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "] + [b"a"] * TRICKLES
        assert await trickle(reader, writer, pieces), "the connection is still open"
    finally:
        writer.close()


async def test_a_connection_that_sends_nothing_is_closed(api: RunningApi) -> None:
    reader, writer = await connect(api)
    try:
        assert await asyncio.wait_for(reader.read(), 10) == b""
    finally:
        writer.close()


@pytest.mark.parametrize("path", ["/api/chat", "/telegram/webhook"])
async def test_a_body_sent_a_byte_at_a_time_is_cut_off(
    api: RunningApi, model_server: FakeModelServer, path: str
) -> None:
    reader, writer = await connect(api)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"X-Telegram-Bot-Api-Secret-Token: {SECRET}\r\nContent-Length: 900000\r\n\r\n"
    ).encode()
    try:
        assert await trickle(reader, writer, [head] + [b" "] * TRICKLES)
    finally:
        writer.close()
    assert model_server.requests == []


async def test_a_prompt_request_on_a_kept_alive_connection_is_answered(
    api: RunningApi,
) -> None:
    """Sent in pieces within the deadlines, twice on one connection, longer in all than
    one deadline: both are answered."""
    reader, writer = await connect(api)
    body = json.dumps({"message": "Hello"}).encode()
    head = (
        "POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    try:
        for _ in range(2):
            for piece in (head[:10], head[10:], body[:5], body[5:]):
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(SECONDS / 5)
            status, answer = await read_response(reader)
            assert status.startswith(b"HTTP/1.1 200"), status
            assert json.loads(answer)["content"]
    finally:
        writer.close()


@pytest.fixture
async def capped_api(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> AsyncIterator[RunningApi]:
    """The server with room for `CAP` connections and a header deadline far away."""
    settings = settings_for(
        tmp_path, bot_api, model_server, http_max_connections=CAP, http_header_timeout_seconds=60
    )
    async with running_api(settings, telegram=telegram_app) as running:
        yield running


CAP = 5


async def test_connections_past_the_cap_are_closed_at_once_and_the_server_stays_reachable(
    capped_api: RunningApi,
) -> None:
    """Idle connections cannot use up the process's file descriptors: past
    HTTP_MAX_CONNECTIONS a new one is closed as soon as it is accepted, and once one of the
    held connections ends a new client is answered again."""
    held = [await connect(capped_api) for _ in range(CAP)]
    try:
        reader, writer = await connect(capped_api)
        try:
            assert await asyncio.wait_for(reader.read(), 10) == b""
        finally:
            writer.close()
        for held_reader, _ in held:
            assert not held_reader.at_eof()
        held.pop()[1].close()
        for _ in range(100):  # the server notices the close on its next loop turns
            reader, writer = await connect(capped_api)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            if answer:
                break
            await asyncio.sleep(0.05)
        assert answer.startswith(b"HTTP/1.1 200"), answer
    finally:
        for _, held_writer in held:
            held_writer.close()
