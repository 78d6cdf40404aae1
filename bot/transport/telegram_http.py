"""Bot API requests over aiohttp instead of PTB's default httpx.

Why: with hundreds of replies in flight, httpcore's connection pool scans every
pooled connection (a readability syscall each) for every request it assigns, so
its cost grows with the square of the concurrency; at 500 simultaneous chats
that bookkeeping was a quarter of the bot's CPU. aiohttp's connector keeps idle
connections in a queue per host and costs the same at any concurrency.

Invariant: the same contract as `HTTPXRequest` — PTB's parameters (a JSON body of
PTB's JSON-encoded values, `RequestData.json_payload`, which the Bot API reads as it
reads a form; multipart when a file is attached), `(status, body)` back for PTB to
interpret, timeouts
raised as `TimedOut` and transport failures as `NetworkError`. Besides, `fetch` downloads
a file within a byte limit: it never reads more than the limit plus one byte, whatever
the response announces or omits (`BodyTooLarge`).
"""

from __future__ import annotations

import json

import aiohttp
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

_JSON = {"Content-Type": "application/json"}
FETCH_CHUNK = 64 * 1024
"""Bytes read at a time by `fetch`."""


class BodyTooLarge(Exception):
    """A response body over the byte limit, said by its Content-Length (`announced`) or
    found while reading (`read`: the bytes read, the limit plus one)."""

    def __init__(self, limit: int, *, read: int, announced: int | None) -> None:
        super().__init__(f"over {limit} bytes (read {read}, announced {announced})")
        self.limit = limit
        self.read = read
        self.announced = announced


class AiohttpRequest(BaseRequest):
    def __init__(
        self,
        *,
        pool_size: int = 256,
        read_timeout: float | None = 5.0,
        write_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
    ) -> None:
        self._pool_size = pool_size
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._session: aiohttp.ClientSession | None = None

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._pool_size, limit_per_host=0)
            self._session = aiohttp.ClientSession(
                connector=connector, headers={"User-Agent": self.USER_AGENT}
            )

    async def shutdown(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        session = self._open_session()
        timeout = self._timeout(
            _given(read_timeout, self._read_timeout),
            _given(write_timeout, self._write_timeout),
            _given(connect_timeout, self._connect_timeout),
            _given(pool_timeout, self._pool_timeout),
        )
        try:
            data, headers = _body(request_data)
            async with session.request(
                method, url, data=data, headers=headers, timeout=timeout
            ) as response:
                return response.status, await response.read()
        except TimeoutError as exc:  # aiohttp.ServerTimeoutError too
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{exc.__class__.__name__}: {exc}") from exc

    async def fetch(self, url: str, *, max_bytes: int) -> bytes:
        """The body of GET `url`, read `FETCH_CHUNK` bytes at a time and never past
        `max_bytes + 1` bytes. Raises `BodyTooLarge` over `max_bytes` (before reading when
        the Content-Length says so; the connection is closed, not drained), `NetworkError`
        for a status other than 200 or a transport failure, `TimedOut`."""
        session = self._open_session()
        timeout = self._timeout(
            self._read_timeout, self._write_timeout, self._connect_timeout, self._pool_timeout
        )
        try:
            async with session.get(url, timeout=timeout) as response:
                if response.status != 200:
                    raise NetworkError(f"download answered HTTP {response.status}")
                announced = response.content_length
                if announced is not None and announced > max_bytes:
                    response.close()
                    raise BodyTooLarge(max_bytes, read=0, announced=announced)
                body = bytearray()
                while chunk := await response.content.read(
                    min(FETCH_CHUNK, max_bytes + 1 - len(body))
                ):
                    body += chunk
                    if len(body) > max_bytes:
                        response.close()
                        raise BodyTooLarge(max_bytes, read=len(body), announced=announced)
                return bytes(body)
        except TimeoutError as exc:
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{exc.__class__.__name__}: {exc}") from exc

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        return self._session

    @staticmethod
    def _timeout(
        read: float | None, write: float | None, connect: float | None, pool: float | None
    ) -> aiohttp.ClientTimeout:
        # aiohttp has no write timeout: sending the body counts against the read one.
        return aiohttp.ClientTimeout(
            total=None,
            connect=None if connect is None or pool is None else connect + pool,
            sock_connect=connect,
            sock_read=None if read is None else read + (write or 0),
        )


def _given(value: ODVInput[float], default: float | None) -> float | None:
    return default if isinstance(value, DefaultValue) else value


def _body(
    request_data: RequestData | None,
) -> tuple[aiohttp.FormData | bytes | None, dict[str, str] | None]:
    """PTB's fields as a JSON body; multipart only when a file goes with them.

    JSON rather than a form: url-encoding every character of a reply and its entities
    cost this bot several times the `json.dumps` of the same fields (handing aiohttp a
    dict would even build a multipart writer, with a fresh uuid4 boundary, per request).
    """
    if request_data is None:
        return None, None
    fields = request_data.json_parameters
    if not request_data.contains_files:
        return json.dumps(fields).encode(), _JSON
    # Unquoted: Telegram reads a file name as the UTF-8 it is (as httpx sends it) and would
    # show aiohttp's percent-encoding of a Cyrillic name literally.
    form = aiohttp.FormData(fields, quote_fields=False)
    for name, (filename, content, mime) in request_data.multipart_data.items():
        form.add_field(name, content, filename=filename, content_type=mime)
    return form, None
