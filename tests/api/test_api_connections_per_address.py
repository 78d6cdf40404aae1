"""One client cannot take the server's connections: at most HTTP_MAX_CONNECTIONS_PER_ADDRESS
are one address's, a few are kept for `/healthz` and `/metrics` from loopback, and behind a
trusted proxy (TRUSTED_PROXIES) the address is the client's it names.

Raw sockets against the real server on 127.0.0.1 (the production runner); the client
sockets are bound to other loopback addresses (127.0.0.2, 127.0.0.3, …) to be other
clients. Every probe has a bounded client timeout; nothing asserts how fast it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from fakes.model_server import FakeModelServer
from tests.api.test_api_read_timeouts import read_response
from tests.api_harness import RunningApi

ATTACKER = "127.0.0.2"
PROBER = "127.0.0.3"
SLOW = 400  # the attacker's connections, each reopened as soon as it is cut
PROBES = 30


async def open_from(
    api: RunningApi, address: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    port = api.client.port
    assert port is not None
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))


@dataclass
class Trickler:
    """`SLOW` connections from one address, each sending a header a byte a second and
    reopened half a second after the server cuts it (a bounded load)."""

    api: RunningApi
    address: str = ATTACKER
    holding: set[int] = field(default_factory=set)  # connections open past their first turn
    opened: int = 0
    stopped: bool = False  # Python 3.11's wait_for can swallow a cancellation: also a flag

    async def one(self, n: int) -> None:
        while not self.stopped:
            try:
                reader, writer = await open_from(self.api, self.address)
            except OSError:
                await asyncio.sleep(0.2)
                continue
            self.opened += 1
            try:
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                while not self.stopped:
                    try:
                        if await asyncio.wait_for(reader.read(1), 1) == b"":
                            break  # cut by the server
                    except TimeoutError:
                        self.holding.add(n)
                        writer.write(b"a")
            except ConnectionError:
                pass
            finally:
                self.holding.discard(n)
                writer.close()
            await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def trickling(api: RunningApi) -> AsyncIterator[Trickler]:
    """The attacker running, once it has opened every connection at least once and holds
    as many as it is given."""
    trickler = Trickler(api)
    tasks = [asyncio.create_task(trickler.one(n)) for n in range(SLOW)]
    try:
        for _ in range(600):
            if trickler.opened >= SLOW and trickler.holding:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the attacker never opened all its connections")
        await asyncio.sleep(1.5)  # every held connection has passed its first turn
        yield trickler
    finally:
        trickler.stopped = True
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=5)


async def probe(api: RunningApi, address: str, request: bytes) -> bytes:
    """The status line of the answer to `request` from `address`; b"" when the connection
    was closed unanswered or no answer came within a second."""
    try:
        reader, writer = await open_from(api, address)
    except OSError:
        return b""
    try:
        writer.write(request)
        return await asyncio.wait_for(reader.readline(), 1)
    except (TimeoutError, ConnectionError):
        return b""
    finally:
        writer.close()


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


@pytest.mark.api_settings(http_header_timeout_seconds=60)
async def test_one_address_holding_400_slow_connections_leaves_healthz_answering_others(
    api: RunningApi,
) -> None:
    """400 trickling connections from one address, reopened as soon as they are cut, hold
    at most their address's share (and the probes' few): every `/healthz` probe from
    another address is answered."""
    async with trickling(api) as attacker:
        answers = [await probe(api, PROBER, HEALTHZ) for _ in range(PROBES)]
        held = len(attacker.holding)

    assert [a[:12] for a in answers] == [b"HTTP/1.1 200"] * PROBES
    assert held <= 32 + 4  # HTTP_MAX_CONNECTIONS_PER_ADDRESS, and the probe slots


@pytest.mark.api_settings(
    http_max_connections=16, http_max_connections_per_address=4, http_header_timeout_seconds=60
)
async def test_with_every_other_connection_taken_loopback_still_reaches_healthz_and_metrics_only(
    api: RunningApi,
) -> None:
    """Clients at four addresses hold every connection but the probes' two: a loopback
    probe still gets `/healthz` and `/metrics`, and a chat request on such a connection is
    refused in JSON (503 SERVER_BUSY) instead of taking it for itself."""
    held = [await open_from(api, f"127.0.0.{10 + n // 4}") for n in range(14)]  # 16 - 2 probe slots
    try:
        for reader, _ in held:
            with pytest.raises(TimeoutError):  # kept open, unanswered
                await asyncio.wait_for(reader.read(1), 0.05)
        assert (await probe(api, PROBER, HEALTHZ)).startswith(b"HTTP/1.1 200")
        metrics = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        assert (await probe(api, PROBER, metrics)).startswith(b"HTTP/1.1 200")

        reader, writer = await open_from(api, PROBER)
        body = json.dumps({"message": "Hello"}).encode()
        writer.write(
            b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        status, answer = await read_response(reader)
        writer.close()
        assert status.startswith(b"HTTP/1.1 503"), status
        assert json.loads(answer)["code"] == "SERVER_BUSY"
    finally:
        for _, writer in held:
            writer.close()


@pytest.mark.api_settings(
    http_max_connections_per_address=2, trusted_proxies="127.0.0.5", api_rate_limit_per_minute=0
)
async def test_behind_a_trusted_proxy_the_limit_is_the_forwarded_client_s(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Through a trusted proxy, each request counts for the client its X-Forwarded-For
    names (the nearest hop that is not a trusted proxy): a client with two requests
    running gets 429 for a third, while another client behind the same proxy is
    answered."""
    release = asyncio.Event()
    for _ in range(2):
        model_server.enqueue("Slow answer", hold=release)
    model_server.enqueue("Quick answer")

    async def chat_via_proxy(client: str) -> tuple[bytes, bytes]:
        reader, writer = await open_from(api, "127.0.0.5")
        body = json.dumps({"message": "Hello"}).encode()
        writer.write(
            b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"X-Forwarded-For: 10.9.9.9, %s, 127.0.0.5\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (client.encode(), len(body), body)
        )
        try:
            return await read_response(reader)
        finally:
            writer.close()

    slow = [asyncio.create_task(chat_via_proxy("198.51.100.7")) for _ in range(2)]
    await model_server.wait_requests(2)
    status, answer = await chat_via_proxy("198.51.100.7")
    assert status.startswith(b"HTTP/1.1 429"), status
    assert json.loads(answer)["code"] == "RATE_LIMITED"
    status, answer = await chat_via_proxy("198.51.100.8")
    assert status.startswith(b"HTTP/1.1 200"), status
    assert json.loads(answer)["content"] == "Quick answer"
    release.set()
    assert [(await task)[0][:12] for task in slow] == [b"HTTP/1.1 200"] * 2
