"""`core.llm.chat_wire.ChatWire` over aiohttp: chat completions without the SDK's layers.

The openai SDK builds every request through its options model, httpx2's request and
client layers and a transport adapter; at hundreds of streams in flight that cost four
times what the same POST costs on aiohttp directly (docs/performance.md). This wire is
that POST, on one pool per process.

Invariants: the timeout bounds the connect and every read, as the SDK's does (a stream
that keeps sending is never cut here: `core.llm.deadline` bounds a whole call); a proxy
comes from the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY), as httpx takes it, read
once per URL (aiohttp's `trust_env` would look it up, and netrc, on a thread for every
request); aiohttp's
errors leave as `WireTimeout` or `WireFailed` raised from them; a body left unread is
closed with its connection, one read to its end goes back to the pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import aiohttp
from aiohttp.helpers import BasicAuth, get_env_proxy_for_url
from yarl import URL

from core.llm.chat_wire import WireFailed, WireTimeout

POOL_SIZE = 1000
"""Connections at most, as the SDK's pool (`DEFAULT_CONNECTION_LIMITS`)."""


class AiohttpResponse:
    """`WireResponse` over one `aiohttp.ClientResponse`."""

    __slots__ = ("_response",)

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    @property
    def status(self) -> int:
        return self._response.status

    def header(self, name: str) -> str | None:
        return self._response.headers.get(name)

    async def chunks(self) -> AsyncIterator[bytes]:
        content = self._response.content
        while True:
            try:
                data = await content.readany()
            except TimeoutError as exc:  # aiohttp's ServerTimeoutError is one too
                raise WireTimeout("no answer within the read timeout") from exc
            except (aiohttp.ClientError, OSError) as exc:
                raise WireFailed(_said(exc)) from exc
            if not data:
                return
            yield data

    async def head(self, limit: int) -> bytes:
        try:
            return await self._response.content.read(limit)
        except TimeoutError as exc:
            raise WireTimeout("no answer within the read timeout") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise WireFailed(_said(exc)) from exc


class AiohttpChatWire:
    """One aiohttp session for every call of a model endpoint; made on first use (a session
    belongs to the running loop)."""

    def __init__(self, *, timeout: float) -> None:
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=None, sock_connect=timeout, sock_read=timeout
        )
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[str, tuple[URL | None, BasicAuth | None]] = {}

    def _opened(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=POOL_SIZE), timeout=self._timeout
            )
        return self._session

    def _proxy(self, url: str) -> tuple[URL | None, BasicAuth | None]:
        """The environment's proxy for `url` (and its credentials), or none."""
        known = self._proxies.get(url)
        if known is None:
            try:
                known = get_env_proxy_for_url(URL(url))
            except LookupError:
                known = (None, None)
            self._proxies[url] = known
        return known

    @asynccontextmanager
    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str]
    ) -> AsyncIterator[AiohttpResponse]:
        proxy, proxy_auth = self._proxy(url)
        try:
            response = await self._opened().post(
                url, data=body, headers=headers, proxy=proxy, proxy_auth=proxy_auth
            )
        except TimeoutError as exc:
            raise WireTimeout("no answer within the timeout") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise WireFailed(_said(exc)) from exc
        try:
            yield AiohttpResponse(response)
        finally:
            if response.content.at_eof():
                response.release()
            else:
                response.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _said(exc: BaseException) -> str:
    """A failure in a few words: its own, or its type's name."""
    return str(exc) or type(exc).__name__
