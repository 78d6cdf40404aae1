"""Server-Sent Events framing and a stream that keeps going when the client leaves.

Invariant: every event is written as `event:` + one `data:` line per line of its
payload + a blank line (the WHATWG framing), writes never interleave, and a client
that disconnects only stops the writing — never the consultation behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Any

from aiohttp import web

_LINES = re.compile(r"\r\n|\r|\n")
KEEPALIVE_SECONDS = 15.0


def format_event(event: str | None, data: str) -> bytes:
    """One SSE event; a payload with line breaks becomes several `data:` lines."""
    lines = [f"event: {event}"] if event else []
    lines.extend(f"data: {line}" for line in _LINES.split(data))
    return ("\n".join(lines) + "\n\n").encode()


class EventStream:
    """A `text/event-stream` response with early headers and comment keep-alives."""

    def __init__(
        self,
        request: web.Request,
        *,
        keepalive: float = KEEPALIVE_SECONDS,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._request = request
        self._keepalive = keepalive
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.closed = False
        self.response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",  # nginx would otherwise hold the events back
                **(headers or {}),
            }
        )

    async def open(self) -> None:
        """Start the response and the keep-alives; the first event sends the headers out."""
        try:
            await self.response.prepare(self._request)
        except ConnectionError:  # the client already left; the round still completes
            self.closed = True
            return
        self._task = asyncio.create_task(self._keep_alive())

    async def send(self, event: str, payload: Any) -> None:
        await self._write(format_event(event, json.dumps(payload, ensure_ascii=False)))

    async def data(self, text: str) -> None:
        """An event with no name: `data:` lines alone (the OpenAI streaming shape)."""
        await self._write(format_event(None, text))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if not self.closed:
            with contextlib.suppress(ConnectionError):
                await self.response.write_eof()
        self.closed = True

    async def _write(self, data: bytes) -> None:
        if self.closed:
            return
        async with self._lock:
            try:
                await self.response.write(data)
            except ConnectionError:  # the client went away; the round still completes
                self.closed = True

    async def _keep_alive(self) -> None:
        while not self.closed:
            await asyncio.sleep(self._keepalive)
            await self._write(b": keep-alive\n\n")
