"""The port a chat-completions call travels through without the openai SDK: one POST
whose answer is read as it streams.

Invariants: a wire returns a response of any status (an error status is the caller's
to read, never raised); it raises only `WireTimeout` (no connection, or no byte of the
answer, within its timeout) and `WireFailed` (the connection refused, reset or closed
before the body ended), each raised from the HTTP library's own exception, so
`core.llm.llm_errors.refused` and `hung_up` can read what happened from the causes.
The engine knows no HTTP library: `app` gives `OpenAICompleter` a wire (the aiohttp one
is `providers.chat_http`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Protocol


class WireTimeout(Exception):
    """The server did not connect or did not send within the wire's timeout."""


class WireFailed(Exception):
    """The connection failed: refused, reset, or closed before the answer ended."""


class WireResponse(Protocol):
    """One answer as it arrives: its status and headers at once, its body in pieces."""

    @property
    def status(self) -> int: ...

    def header(self, name: str) -> str | None:
        """A header's value (names are case-insensitive), None when absent."""
        ...

    def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive, to its end."""
        ...

    async def head(self, limit: int) -> bytes:
        """At most `limit` bytes of the body (an error's words: bounded, a body is a server's)."""
        ...


class ChatWire(Protocol):
    """Sends one JSON request and hands its answer over as it comes."""

    def post(
        self, url: str, body: bytes, headers: Mapping[str, str]
    ) -> AbstractAsyncContextManager[WireResponse]:
        """The answer to `body` POSTed at `url`; leaving the context frees the connection
        (kept for the next call when the body was read to its end)."""
        ...

    async def close(self) -> None:
        """Close every connection; no call is made afterwards."""
        ...
