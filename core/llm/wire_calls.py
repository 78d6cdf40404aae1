"""One streamed chat-completions call sent over a `ChatWire`, with the SDK's retries.

Invariants: a call is retried, at most `max_retries` times, only before its answer
begins to stream, and by the openai SDK's rule: a timeout, a failed connection, or a
status of 408, 409, 429 or 5xx, unless the server says `x-should-retry: false` or asks
for a wait over two minutes; the wait is the server's `retry-after-ms` or `retry-after`
(seconds or a date) when it is two minutes or less, else half a second doubling to 8 s, less
up to a quarter at random. What fails after that leaves as `CallFailed` shaped as the
SDK would say it ("Error code: 429 - <the error's message>", the error object as body).
The answer's events are read with the same decoder as the SDK's path (`EventData`);
`[DONE]` ends the chunks and what follows is read for at most
`core.llm.llm_stream.DRAIN_SECONDS` so the connection can be used again; an event
carrying an `error` object is a `CallFailed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import math
import random
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from core.llm.call_failure import CallFailed, retried
from core.llm.chat_wire import ChatWire, WireFailed, WireResponse, WireTimeout
from core.llm.llm_stream import EventData, read_out, stream_error_message

INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
MAX_RETRY_AFTER = 120.0
"""A server's own wait is taken up to this; one asking for longer is not asked again (the
SDK's figures, as `INITIAL_RETRY_DELAY` and `MAX_RETRY_DELAY`)."""
ERROR_BODY_BYTES = 65_536
"""An error answer's body is read to this length at most."""


class WireCalls:
    """Streamed calls to one endpoint's `/chat/completions` over `wire`."""

    def __init__(
        self, wire: ChatWire, *, base_url: str, headers: Mapping[str, str], max_retries: int
    ) -> None:
        self._wire = wire
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._headers = dict(headers)
        self.max_retries = max_retries

    async def close(self) -> None:
        await self._wire.close()

    @contextlib.asynccontextmanager
    async def stream(
        self, body: dict[str, Any], *, retries: int
    ) -> AsyncIterator[AsyncIterator[Any]]:
        """The decoded chunks of the answer to `body`, asked again at most `retries` times
        before it begins; leaving the context closes what was not read."""
        data = json.dumps(body).encode()
        attempt = 0
        while True:
            async with contextlib.AsyncExitStack() as stack:
                try:
                    response = await stack.enter_async_context(
                        self._wire.post(self._url, data, self._headers)
                    )
                    failure = (
                        None if response.status < 400 else await self._status_failure(response)
                    )
                except (WireTimeout, WireFailed) as exc:
                    failure = _connection_failure(exc)
                    failure.__cause__ = exc
                    response = None
                if failure is None and response is not None:
                    yield _chunks(response)
                    return
                assert failure is not None
                wait = _retry_wait(failure, response, attempt, retries)
            if wait is None:
                raise failure
            attempt += 1
            await asyncio.sleep(wait)

    async def _status_failure(self, response: WireResponse) -> CallFailed:
        """An error answer as the SDK says it: "Error code: N", then the error's message."""
        try:
            raw = await response.head(ERROR_BODY_BYTES)
        except (WireTimeout, WireFailed):
            raw = b""
        text = raw.decode("utf-8", "replace").strip()
        body: object = text
        message = f"Error code: {response.status}"
        code = None
        try:
            parsed = json.loads(text)
        except ValueError:
            pass
        else:
            body = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
            if isinstance(body, dict):
                said = body.get("message")
                if isinstance(said, str) and said:
                    message += f" - {said}"
                code = body.get("code") if isinstance(body.get("code"), str) else None
        return CallFailed(message, status=response.status, code=code, body=body, url=self._url)


def _connection_failure(exc: WireTimeout | WireFailed) -> CallFailed:
    if isinstance(exc, WireTimeout):
        return CallFailed("Request timed out.", timed_out=True)
    return CallFailed("Connection error.", connection=True)


def _retry_wait(
    failure: CallFailed, response: WireResponse | None, attempt: int, retries: int
) -> float | None:
    """How long to wait before asking again, or None when not to."""
    if attempt >= retries:
        return None
    after = _retry_after(response) if response is not None else None
    if response is not None:
        if after is not None and math.isfinite(after) and after > MAX_RETRY_AFTER:
            return None
        should = response.header("x-should-retry")
        if should == "false":
            return None
        if should != "true" and not retried(failure):
            return None
    elif not retried(failure):
        return None
    if after is not None and math.isfinite(after) and 0 < after <= MAX_RETRY_AFTER:
        return after
    return min(INITIAL_RETRY_DELAY * 2.0**attempt, MAX_RETRY_DELAY) * (1 - 0.25 * random.random())


def _retry_after(response: WireResponse) -> float | None:
    """The server's wait in seconds: `retry-after-ms`, `retry-after` as seconds or a date."""
    for header, divisor in (("retry-after-ms", 1000), ("retry-after", 1)):
        value = response.header(header)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            continue
    value = response.header("retry-after")
    if value is None:
        return None
    try:
        when = email.utils.parsedate_tz(value)
        return None if when is None else float(email.utils.mktime_tz(when) - time.time())
    except (TypeError, ValueError, OverflowError, OSError):
        return None


async def _chunks(response: WireResponse) -> AsyncIterator[Any]:
    """Each event's JSON until `[DONE]` (ValueError for one that is not JSON); a failure of
    the connection while reading is a `CallFailed`."""
    events = EventData()
    pieces = response.chunks()
    try:
        async for piece in pieces:
            for data in events.feed(piece):
                if data.startswith("[DONE]"):
                    await read_out(pieces, (WireTimeout, WireFailed))
                    return
                chunk = json.loads(data)
                if isinstance(chunk, dict) and chunk.get("error"):
                    raise _stream_error(chunk["error"])
                yield chunk
        events.finish()
    except (WireTimeout, WireFailed) as exc:
        raise _connection_failure(exc) from exc


def _stream_error(error: object) -> CallFailed:
    """An error event as the SDK raises it: its message, or a generic one; its code kept."""
    message = stream_error_message(error)
    code = error.get("code") if isinstance(error, dict) else None
    return CallFailed(message, code=code if isinstance(code, str) else None, body=error)
