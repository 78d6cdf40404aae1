"""The HTTP server around the app: JSON for the parser's own refusals, no version banner.

Invariants: whatever bytes arrive, the answer is the API's JSON error shape — also
for requests aiohttp's HTTP parser refuses before any route or middleware runs
(a bad `Content-Length`, a NUL in a header, a TLS handshake on the plain port),
which aiohttp would otherwise answer with its parser message, raw bytes included.
No response names the server software or its version (`Server: Python/3.x aiohttp/3.x`
would tell an attacker which advisories apply). A client's malformed request is
logged as one line, never with a traceback.

aiohttp has no public hook for the parser's refusals: they are answered by
`RequestHandler.handle_error`, so the runner builds its connections with a
`RequestHandler` whose `handle_error` answers in JSON.

A request's line and headers must arrive within HTTP_HEADER_TIMEOUT_SECONDS in all,
counted from the connection (or from the first byte after the previous request), and its
body within HTTP_BODY_TIMEOUT_SECONDS of its headers: otherwise the connection is closed.
aiohttp bounds only idle time, which a client sending a byte every few seconds never has.

At most HTTP_MAX_CONNECTIONS connections are open at once, and at most
HTTP_MAX_CONNECTIONS_PER_ADDRESS from one address; a few are kept for `/healthz` and
`/metrics` from loopback (`api.connection_slots`). One past a limit is closed as soon as
it is accepted, so clients holding connections cannot use up the file descriptors the
bot needs for Telegram, the model, the database and its document readers, and one client
cannot take them all from the others. A request from a trusted proxy (TRUSTED_PROXIES)
is counted, and seen by the app (`request.remote`), as its client's (`X-Forwarded-For`).
Connections closed past a limit or for a read deadline are logged as counts, at most a
line per reason every ten seconds (`api.close_log`), however many there are.

The access log (`AccessLog`, API_ACCESS_LOG) is one line per request: method, path,
status and milliseconds — never the query string, a header or a body, where tokens
and users' text travel.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from aiohttp import hdrs, web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler, RequestPayloadError
from aiohttp.web_request import BaseRequest

from api.close_log import CloseTally
from api.config import ApiConfig
from api.connection_slots import (
    PROBE_PATHS,
    ConnectionSlots,
    IPAddress,
    Slot,
    SlotLimits,
    forwarded_client,
    is_trusted,
    parse_address,
)
from api.errors import ApiError, json_response

log = logging.getLogger(__name__)
access_log = logging.getLogger("api.access")

SERVER_NAME = "consultation-api"
"""The `Server` header of every response: a name, no version."""


def name_the_server(app: web.Application) -> None:
    """Replace aiohttp's `Server` banner on every response the app prepares."""

    async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["Server"] = SERVER_NAME

    app.on_response_prepare.append(on_prepare)


@dataclass(frozen=True, slots=True)
class ReadTimeouts:
    """Seconds a client has to send a request's line and headers, and then its body; and
    the connections it may hold (`api.connection_slots`)."""

    headers: float = 10.0
    body: float = 30.0
    slots: SlotLimits = field(default_factory=SlotLimits)


class JsonErrorProtocol(RequestHandler):
    """A connection whose own error answers (parser refusals, crashes outside the app) are JSON."""

    __slots__ = ("_body", "_body_due", "_headers_due", "_read_timeouts", "peer", "slot")

    def __init__(self, manager: web.Server, *, read_timeouts: ReadTimeouts, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._read_timeouts = read_timeouts
        self._headers_due: asyncio.TimerHandle | None = None
        self._body_due: asyncio.TimerHandle | None = None
        self._body: StreamReader | None = None  # the newest request's body, once parsed
        self.peer: IPAddress | None = None
        self.slot: Slot | None = None  # held while open (`JsonErrorServer.admit`)

    # -- read deadlines ----------------------------------------------------------------------
    # aiohttp bounds only the idle time between requests (keep-alive), and a client that
    # sends a byte every few seconds is never idle. The clock for a request's headers starts
    # with the connection, or with the first byte after the previous request's body; the
    # clock for its body starts when its headers are in. Either running out closes the
    # connection.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        manager = self._manager
        self.peer = parse_address(_peer_host(transport))
        if isinstance(manager, JsonErrorServer) and not manager.admit(self):
            self.force_close()
            transport.close()
            return
        self._expect_headers()

    def data_received(self, data: bytes) -> None:
        if self._headers_due is None and (self._body is None or self._body.is_eof()):
            self._expect_headers()  # the first bytes of the next request
        parsed = self._request_count
        super().data_received(data)
        if self._request_count == parsed or not self._messages:
            return
        if self._headers_due is not None:  # the headers are in
            self._headers_due.cancel()
            self._headers_due = None
        self._body = self._messages[-1][1]
        if self._body_due is not None:
            self._body_due.cancel()
            self._body_due = None
        if not self._body.is_eof():
            self._body_due = self._loop.call_later(
                self._read_timeouts.body, self._body_late, self._body
            )

    def connection_lost(self, exc: BaseException | None) -> None:
        for due in (self._headers_due, self._body_due):
            if due is not None:
                due.cancel()
        self._headers_due = self._body_due = None
        if isinstance(self._manager, JsonErrorServer):
            self._manager.release(self)
        super().connection_lost(exc)

    def _expect_headers(self) -> None:
        self._headers_due = self._loop.call_later(self._read_timeouts.headers, self._headers_late)

    def _headers_late(self) -> None:
        self._headers_due = None
        if self._request_in_progress or self._messages:  # a pipelined request is waiting
            self._expect_headers()
            return
        if isinstance(self._manager, JsonErrorServer):
            self._manager.closed.headers_late.note()
        self.force_close()

    def _body_late(self, body: StreamReader) -> None:
        self._body_due = None
        if body is self._body and not body.is_eof():
            if isinstance(self._manager, JsonErrorServer):
                self._manager.closed.body_late.note()
            self.force_close()

    def close_unread(self) -> None:
        """End the connection once the current response is sent, leaving the rest of the
        request's body unread (aiohttp would read and drop it for up to its lingering
        time: the very bytes a refusal is meant not to take in)."""
        self._lingering_time = 0.0

    def log_exception(self, *args: Any, **kw: Any) -> None:
        """A client's malformed request or body is one line; anything else keeps its traceback."""
        error = kw.get("exc_info")
        if isinstance(error, HttpProcessingError | RequestPayloadError):
            log.info("malformed HTTP request (%s)", type(error).__name__)
            return
        super().log_exception(*args, **kw)

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:  # the answer had started: nothing can be sent now
            raise ConnectionError("the response was already being sent")
        if status < 500:
            # The client's fault: the kind of error only, never the bytes it quoted.
            log.info("malformed HTTP request from %s (%s)", request.remote, type(exc).__name__)
            error = ApiError("VALIDATION_ERROR", "malformed HTTP request")
        else:
            log.error("error handling a request from %s", request.remote, exc_info=exc)
            error = ApiError("INTERNAL_ERROR", "internal error")
        response = json_response(error.body(), status=error.status)
        response.headers["Server"] = SERVER_NAME
        response.force_close()
        return response


def close_unread(request: BaseRequest) -> None:
    """`JsonErrorProtocol.close_unread` for the request's connection (other servers: a no-op)."""
    if isinstance(request.protocol, JsonErrorProtocol):
        request.protocol.close_unread()


def _peer_host(transport: asyncio.BaseTransport) -> str | None:
    peer = transport.get_extra_info("peername")
    return peer[0] if isinstance(peer, tuple) and peer else None


@dataclass(frozen=True, slots=True)
class Closes:
    """The server's own closes, one count per reason (see `api.close_log`)."""

    past_cap: CloseTally
    past_address: CloseTally
    headers_late: CloseTally
    body_late: CloseTally

    @classmethod
    def of(cls, limits: ReadTimeouts) -> Closes:
        slots = limits.slots
        return cls(
            CloseTally(
                f"past the cap of {slots.total} open (HTTP_MAX_CONNECTIONS)",
                level=logging.WARNING,
            ),
            CloseTally(
                f"past {slots.per_address} open from one address "
                "(HTTP_MAX_CONNECTIONS_PER_ADDRESS)",
                level=logging.WARNING,
            ),
            CloseTally(f"that sent no complete headers within {limits.headers:g} s"),
            CloseTally(f"whose request body did not arrive within {limits.body:g} s"),
        )

    def stop(self) -> None:
        for tally in (self.past_cap, self.past_address, self.headers_late, self.body_late):
            tally.stop()


class JsonErrorServer(web.Server):
    """`web.Server` building `JsonErrorProtocol` connections, each in a slot of its own
    (`api.connection_slots`), and screening every request for its slot."""

    def __init__(self, *args: Any, read_timeouts: ReadTimeouts, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read_timeouts = read_timeouts
        self.slots = ConnectionSlots(read_timeouts.slots)
        self.closed = Closes.of(read_timeouts)
        self._app_handler = self.request_handler
        self.request_handler = self._screened

    def admit(self, connection: JsonErrorProtocol) -> bool:
        """Give a new connection a slot; False (it is to be closed) when it gets none."""
        slot = self.slots.take(connection.peer, via_proxy=self._via_proxy(connection))
        if slot is None:
            if self.slots.general_full():
                self.closed.past_cap.note()
            else:
                self.closed.past_address.note()
            return False
        connection.slot = slot
        return True

    def release(self, connection: JsonErrorProtocol) -> None:
        if connection.slot is not None:
            self.slots.give_back(
                connection.peer, connection.slot, via_proxy=self._via_proxy(connection)
            )
            connection.slot = None

    async def shutdown(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 - aiohttp's
        await super().shutdown(timeout)
        self.closed.stop()

    def _via_proxy(self, connection: JsonErrorProtocol) -> bool:
        return is_trusted(connection.peer, self.read_timeouts.slots.trusted_proxies)

    async def _screened(self, request: BaseRequest) -> web.StreamResponse:
        """The app's answer, unless the connection's slot does not serve the request: a
        probe slot serves `PROBE_PATHS` only, and a trusted proxy's request is counted
        under its client's address while it runs (and the app sees that address)."""
        connection = request.protocol
        if not isinstance(connection, JsonErrorProtocol):
            return await self._app_handler(request)
        if connection.slot is Slot.PROBE and request.path not in PROBE_PATHS:
            connection.close_unread()
            return _refusal(
                "SERVER_BUSY", "the server is at its connection limit: try again shortly"
            )
        if connection.peer is None or not self._via_proxy(connection):
            return await self._app_handler(request)
        client = forwarded_client(
            request.headers.getall(hdrs.X_FORWARDED_FOR, ()),
            connection.peer,
            self.read_timeouts.slots.trusted_proxies,
        )
        if not self.slots.take_request(client):
            connection.close_unread()
            return _refusal("RATE_LIMITED", "too many requests at once from this address")
        try:
            return await self._app_handler(request.clone(remote=str(client)))
        finally:
            self.slots.give_back_request(client)

    def __call__(self) -> RequestHandler:
        return JsonErrorProtocol(
            self, loop=self._loop, read_timeouts=self.read_timeouts, **self._kwargs
        )


def _refusal(code: str, message: str) -> web.StreamResponse:
    """The JSON refusal of a request its connection's slot does not serve; the connection
    closes after it (its body, if any, unread)."""
    error = ApiError(code, message)
    response = json_response(error.body(), status=error.status, headers={"Retry-After": "1"})
    response.headers["Server"] = SERVER_NAME
    response.force_close()
    return response


class ApiRunner(web.AppRunner):
    """`web.AppRunner` whose server answers protocol errors in JSON and cuts off slow reads."""

    def __init__(
        self, app: web.Application, *, read_timeouts: ReadTimeouts | None = None, **kwargs: Any
    ) -> None:
        super().__init__(app, **kwargs)
        self._read_timeouts = read_timeouts or ReadTimeouts()

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        return JsonErrorServer(
            server.request_handler,
            request_factory=server.request_factory,
            handler_cancellation=server.handler_cancellation,
            loop=server._loop,
            read_timeouts=self._read_timeouts,
            **server._kwargs,
        )


class AccessLog(AbstractAccessLogger):
    """`GET /healthz 200 1 ms`: what was asked, how it ended, how long it took."""

    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        method = request.method if request.method.isalpha() else "OTHER"
        self.logger.info("%s %s %d %.0f ms", method, request.path, response.status, time * 1000)

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)


def read_timeouts(config: ApiConfig) -> ReadTimeouts:
    slots = SlotLimits(
        config.max_connections, config.max_connections_per_address, config.trusted_proxies
    )
    return ReadTimeouts(config.header_timeout_seconds, config.body_timeout_seconds, slots)


def runner_options(config: ApiConfig) -> dict[str, Any]:
    """`ApiRunner`'s arguments: the read deadlines, the access log (API_ACCESS_LOG)."""
    options: dict[str, Any] = {"read_timeouts": read_timeouts(config)}
    if not config.access_log:
        return options | {"access_log": None}
    return options | {"access_log": access_log, "access_log_class": AccessLog}
