"""What anyone can send: malformed HTTP, odd headers and a model that misbehaves mid-round.

Each answer is JSON with a stable code, never echoes the raw bytes, never names the server
software, and never puts a traceback in the log for a client's fault.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from openai._streaming import SSEDecoder

from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi

TOKEN = "hardening-token"


pytestmark = pytest.mark.api_settings(api_token=TOKEN)


async def raw_exchange(api: RunningApi, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are on a fresh connection; read the answer until the server closes."""
    server = api.client.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(data)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def assert_quiet_json_error(
    status: int, headers: dict[str, str], body: bytes, caplog: pytest.LogCaptureFixture
) -> dict[str, Any]:
    assert headers["content-type"].startswith("application/json")
    assert "aiohttp" not in headers.get("server", "") and "Python" not in headers.get("server", "")
    error = json.loads(body)
    assert set(error) >= {"error", "code"}
    assert [r for r in caplog.records if r.exc_info] == []  # no traceback for a client's fault
    return error


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Length: 12<b>evil</b>\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: a\x00<b>evil</b>\r\n\r\n",
        b"G<b>evil</b>T / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/9.<b>evil</b>\r\nHost: x\r\n\r\n",
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03<b>evil</b>\r\n\r\n",
    ],
    ids=["content-length", "nul-in-header", "bad-method", "bad-version", "tls-on-http"],
)
async def test_protocol_errors_are_json_without_the_raw_bytes(
    api: RunningApi, caplog: pytest.LogCaptureFixture, request_bytes: bytes
) -> None:
    """The HTTP parser's own refusals are the API's JSON 400, and repeat nothing sent."""
    caplog.set_level(logging.DEBUG)
    status, headers, body = await raw_exchange(api, request_bytes)
    assert status == 400
    error = assert_quiet_json_error(status, headers, body, caplog)
    assert error["code"] == "VALIDATION_ERROR"
    assert b"evil" not in body


async def test_a_non_utf8_authorization_header_is_a_plain_401(
    api: RunningApi, caplog: pytest.LogCaptureFixture
) -> None:
    """Bytes that are not UTF-8 in `Authorization` are a wrong token, not a crash."""
    request = (
        b"POST /api/chat HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\xc3\r\n"
        b"Content-Type: application/json\r\nContent-Length: 17\r\nConnection: close\r\n\r\n"
        b'{"message": "hi"}'
    )
    status, headers, body = await raw_exchange(api, request)
    assert status == 401
    error = assert_quiet_json_error(status, headers, body, caplog)
    assert error["code"] == "UNAUTHORIZED"


async def test_no_response_names_the_server_software(api: RunningApi) -> None:
    """`Server` never carries the Python or aiohttp version: successes, errors, 404s, streams."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    responses = [
        await api.client.get("/healthz"),
        await api.client.get("/metrics"),
        await api.client.get("/nowhere"),
        await api.client.post("/api/chat", json={"message": " "}, headers=auth),
        await api.client.post("/api/chat", json={"message": "hi"}),
        await api.client.post("/api/chat/stream", json={"message": "hi"}, headers=auth),
    ]
    for response in responses:
        await response.read()
        server = response.headers.get("Server", "")
        assert "aiohttp" not in server and "Python" not in server, server


@pytest.mark.parametrize(
    "raw_events",
    [[b"data: not json\n\n"], [b'data: {"choices": "oops"}\n\n'], [b"data: [1, 2]\n\n"]],
    ids=["not-json", "wrong-shape", "array"],
)
async def test_a_broken_model_stream_names_the_session_to_retry(
    api: RunningApi, model_server: FakeModelServer, raw_events: list[bytes]
) -> None:
    """Whatever goes wrong inside the round, the JSON error carries the new session's id."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    model_server.enqueue(raw_events=raw_events)
    response = await api.client.post(
        "/api/chat", json={"message": "Plan", "maxRounds": 2}, headers=auth
    )
    error = await response.json()
    assert response.status >= 500 and error["code"] in {
        "MODEL_ERROR", "MODEL_UNAVAILABLE", "INTERNAL_ERROR"}  # fmt: skip
    session = error["sessionId"]
    model_server.enqueue("Which days?")
    response = await api.client.post(
        "/api/chat", json={"message": "Plan", "sessionId": session}, headers=auth
    )
    answer = await response.json()
    assert (response.status, answer["round"], answer["sessionId"]) == (200, 1, session)

    model_server.enqueue(raw_events=raw_events)
    response = await api.client.post(
        "/api/chat/stream", json={"message": "Plan B", "maxRounds": 2}, headers=auth
    )
    events = [e async for e in SSEDecoder().aiter_bytes(response.content.iter_any())]
    assert [e.event for e in events] == ["session", "error"]
    assert events[1].json()["sessionId"] == events[0].json()["sessionId"]


async def test_any_failure_inside_the_round_is_json_with_the_session(
    api: RunningApi, model_server: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Not only model errors: the store failing under a running round still names the session."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    release = asyncio.Event()
    model_server.enqueue("An answer that cannot be stored", hold=release)
    pending = asyncio.create_task(
        api.client.post("/api/chat", json={"message": "Plan", "maxRounds": 2}, headers=auth)
    )
    await model_server.wait_requests(1)
    await api.store.close()
    release.set()
    response = await pending
    error = await response.json()
    assert response.status >= 500 and error["code"] in {"INTERNAL_ERROR", "STORE_UNAVAILABLE"}
    assert len(error["sessionId"]) == 36


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Encoding: gzip\r\nContent-Length: 12\r\n\r\nnot gzipped!",
        b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n0\r\n\r\n",
    ],
    ids=["bad-gzip", "bad-deflate-chunked"],
)
async def test_a_body_that_cannot_be_decoded_is_a_quiet_400(
    api: RunningApi, caplog: pytest.LogCaptureFixture, request_bytes: bytes
) -> None:
    """A body the server cannot decode is the client's fault: JSON 400, no traceback."""
    caplog.set_level(logging.DEBUG)
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
    status, headers, body = await raw_exchange(
        api, request_bytes.replace(b"\r\n", b"\r\n" + auth, 1)
    )
    assert status == 400
    error = assert_quiet_json_error(status, headers, body, caplog)
    assert error["code"] == "VALIDATION_ERROR"


@pytest.mark.parametrize(
    "body",
    [
        {"message": "Hello\u0000there"},
        {"message": "Hello", "systemPrompt": "You are\u0000a judge"},
        {"message": "Hello", "outputFormat": "json", "outputSchema": "{\u0000}"},
        {"message": "Hello", "model": "test\u0000model"},
    ],
    ids=["message", "system-prompt", "output-schema", "model"],
)
async def test_a_nul_character_in_the_text_is_a_400(
    api: RunningApi, model_server: FakeModelServer, body: dict[str, Any]
) -> None:
    """PostgreSQL cannot store NUL in text and SQLite would: the API refuses it on both, with
    the field named, before anything is stored or asked."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    for path in ("/api/chat", "/api/chat/stream"):
        response = await api.client.post(path, data=json.dumps(body), headers=headers)
        error = await response.json()
        assert (response.status, error["code"]) == (400, "VALIDATION_ERROR"), error
        assert "NUL" in error["error"]
    assert model_server.requests == []
