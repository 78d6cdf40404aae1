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

The access log (`AccessLog`, API_ACCESS_LOG) is one line per request: method, path,
status and milliseconds — never the query string, a header or a body, where tokens
and users' text travel.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler, RequestPayloadError
from aiohttp.web_request import BaseRequest

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


class JsonErrorProtocol(RequestHandler):
    """A connection whose own error answers (parser refusals, crashes outside the app) are JSON."""

    __slots__ = ()

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


class JsonErrorServer(web.Server):
    """`web.Server` building `JsonErrorProtocol` connections."""

    def __call__(self) -> RequestHandler:
        return JsonErrorProtocol(self, loop=self._loop, **self._kwargs)


class ApiRunner(web.AppRunner):
    """`web.AppRunner` whose server answers protocol errors in JSON."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        return JsonErrorServer(
            server.request_handler,
            request_factory=server.request_factory,
            handler_cancellation=server.handler_cancellation,
            loop=server._loop,
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


def runner_options(enabled: bool) -> dict[str, Any]:
    """The access-log arguments of `ApiRunner` (API_ACCESS_LOG on or off)."""
    if not enabled:
        return {"access_log": None}
    return {"access_log": access_log, "access_log_class": AccessLog}
