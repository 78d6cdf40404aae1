"""Large chat bodies share one budget of bytes in flight (API_BODY_BYTES_IN_FLIGHT).

Raw sockets against the real server on 127.0.0.1 (the production runner and runtime, real
SQLite, the fake model server): clients hold their bodies half sent, so the test decides
exactly which bodies are in flight when the next request arrives.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import sqlite3

import pytest

from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi

DOCUMENT_BYTES = 100_000
BUDGET = 300_000  # two of the bodies below at once, not three


pytestmark = pytest.mark.api_settings(
    api_max_body_bytes=100_000,
    max_document_bytes=DOCUMENT_BYTES,
    api_body_bytes_in_flight=BUDGET,
    api_rate_limit_per_minute=0,
    http_header_timeout_seconds=60,
    http_body_timeout_seconds=60,
)


def chat_body(word: str) -> bytes:
    """A question with a 99 KB text file: a body of about 132 KB."""
    text = (f"{word} " * (DOCUMENT_BYTES // (len(word) + 1)))[: DOCUMENT_BYTES - 1000]
    data = base64.b64encode(text.encode()).decode("ascii")
    attachment = {"name": "notes.txt", "mimeType": "text/plain", "data": data}
    return json.dumps({"message": f"about {word}", "attachments": [attachment]}).encode()


def head(length: int | None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        "POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"{framing}\r\nConnection: close\r\n\r\n"
    ).encode()


class Client:
    """One raw connection sending one request, its body in pieces the test chooses."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, api: RunningApi) -> Client:
        assert api.client.port is not None
        return cls(*await asyncio.open_connection("127.0.0.1", api.client.port))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def answer(self) -> tuple[int, dict[str, str], dict[str, object]]:
        """The response (the server closes the connection after it)."""
        raw = await asyncio.wait_for(self.reader.read(), 10)
        top, _, payload = raw.partition(b"\r\n\r\n")
        lines = top.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        return int(lines[0].split()[1]), headers, json.loads(payload)

    def close(self) -> None:
        self.writer.close()


def sessions(api: RunningApi) -> int:
    with contextlib.closing(sqlite3.connect(api.settings.db_path)) as db:
        return int(db.execute("SELECT count(*) FROM consultations").fetchone()[0])


def asked(model_server: FakeModelServer, word: str) -> bool:
    return any(word in json.dumps(request) for request in model_server.requests)


async def test_bodies_past_the_budget_are_refused_unread_and_the_admitted_ones_answered(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Two bodies fill the budget: a third request gets 503 SERVER_BUSY with Retry-After
    at once, though it sent no byte of its body; nothing of it is stored. The two are
    answered, and once they are the budget is free again."""
    bodies = [chat_body(word) for word in ("alpha", "beta")]
    held = [await Client.open(api) for _ in bodies]
    for client, body in zip(held, bodies, strict=True):
        await client.send(head(len(body)) + body[:1000])
    await api.arrivals.wait(2)

    refused = await Client.open(api)
    await refused.send(head(len(chat_body("gamma"))))  # headers only: no body byte sent
    status, headers, error = await refused.answer()
    refused.close()
    assert (status, error["code"]) == (503, "SERVER_BUSY")
    assert headers["Retry-After"].isdigit()
    assert sessions(api) == 0

    for client, body in zip(held, bodies, strict=True):
        await client.send(body[1000:])
    answers = [await client.answer() for client in held]
    for client in held:
        client.close()
    assert [status for status, _, _ in answers] == [200, 200]
    assert sessions(api) == 2
    assert asked(model_server, "alpha") and asked(model_server, "beta")
    assert not asked(model_server, "gamma")

    again = [chat_body(word) for word in ("delta", "epsilon")]
    replies = await asyncio.gather(
        *(
            api.client.post("/api/chat", data=body, headers={"Content-Type": "application/json"})
            for body in again
        )
    )
    assert [reply.status for reply in replies] == [200, 200]


async def test_small_bodies_are_never_refused_while_the_budget_is_full(
    api: RunningApi,
) -> None:
    """Ordinary chat reserves nothing: it is answered while large bodies fill the budget."""
    bodies = [chat_body(word) for word in ("alpha", "beta")]
    held = [await Client.open(api) for _ in bodies]
    for client, body in zip(held, bodies, strict=True):
        await client.send(head(len(body)) + body[:1000])
    await api.arrivals.wait(2)
    reply = await api.client.post("/api/chat", json={"message": "hello"})
    assert reply.status == 200
    for client in held:
        client.close()


async def test_a_body_without_a_length_is_refused_once_it_outgrows_the_budget(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A chunked body reserves as it arrives: past the room left it is refused mid-way,
    its connection closed, nothing stored."""
    body = chat_body("alpha")
    holder = await Client.open(api)
    await holder.send(head(len(body)) + body[:1000])
    await api.arrivals.wait(1)
    second = await Client.open(api)
    await second.send(head(len(body)) + body[:1000])
    await api.arrivals.wait(2)

    chunked = await Client.open(api)
    await chunked.send(head(None))
    piece = chat_body("gamma")
    answer = asyncio.ensure_future(chunked.answer())
    for start in range(0, len(piece), 16_384):
        chunk = piece[start : start + 16_384]
        with contextlib.suppress(ConnectionError):
            await chunked.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        if answer.done():
            break
    else:
        await chunked.send(b"0\r\n\r\n")
    status, headers, error = await answer
    chunked.close()
    assert (status, error["code"]) == (503, "SERVER_BUSY")
    assert "Retry-After" in headers
    holder.close()
    second.close()
    assert not asked(model_server, "gamma")


async def test_a_client_that_hangs_up_mid_body_gives_its_share_back(api: RunningApi) -> None:
    """Two clients that reserved and left: two full bodies are then admitted together."""
    bodies = [chat_body(word) for word in ("alpha", "beta")]
    gone = [await Client.open(api) for _ in bodies]
    for client, body in zip(gone, bodies, strict=True):
        await client.send(head(len(body)) + body[:1000])
    await api.arrivals.wait(2)
    for client in gone:
        client.close()
    again = [chat_body(word) for word in ("delta", "epsilon")]
    statuses: list[int] = []
    for _ in range(100):  # the server notices the hang-ups on its next loop turns
        replies = await asyncio.gather(
            *(
                api.client.post(
                    "/api/chat", data=body, headers={"Content-Type": "application/json"}
                )
                for body in again
            )
        )
        statuses = [reply.status for reply in replies]
        if statuses == [200, 200]:
            break
        await asyncio.sleep(0.05)
    assert statuses == [200, 200]


async def test_a_request_gives_its_share_back_once_its_files_are_read(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A document read into text no longer holds the budget: while its round waits for the
    model, two more large bodies are admitted together."""
    release = asyncio.Event()
    model_server.enqueue("held answer", hold=release)
    post = {"headers": {"Content-Type": "application/json"}}
    waiting = asyncio.ensure_future(api.client.post("/api/chat", data=chat_body("alpha"), **post))
    await model_server.wait_requests(1)
    replies = await asyncio.gather(
        *(api.client.post("/api/chat", data=chat_body(w), **post) for w in ("beta", "gamma"))
    )
    assert [reply.status for reply in replies] == [200, 200]
    release.set()
    assert (await waiting).status == 200


async def test_a_body_over_the_limit_is_too_large_even_while_the_budget_is_full(
    api: RunningApi,
) -> None:
    """A declared length past the chat limit is 413 PAYLOAD_TOO_LARGE (waiting would not
    help), not SERVER_BUSY, whatever is in flight."""
    bodies = [chat_body(word) for word in ("alpha", "beta")]
    held = [await Client.open(api) for _ in bodies]
    for client, body in zip(held, bodies, strict=True):
        await client.send(head(len(body)) + body[:1000])
    await api.arrivals.wait(2)
    huge = await Client.open(api)
    await huge.send(head(250_000))
    status, _, error = await huge.answer()
    huge.close()
    assert (status, error["code"]) == (413, "PAYLOAD_TOO_LARGE")
    for client in held:
        client.close()
