"""One chat request's round in flight: its outcome, its streamed text, its message.

Invariants:
- a round runs in a task of its own and requests only await its outcome through a
  shield, so a client that hangs up never aborts the round (nor a retry joined to it);
- a round task's `session` resolves (or fails with the refusal) before its `result`, so a
  stream opens only once the session is vetted;
- an outcome nobody awaits any more is still retrieved: a client that left leaves no
  "exception was never retrieved" behind;
- appending every `delta` a relay sent rebuilds exactly the text so far; when the text
  so far is not a continuation of what was sent, a `snapshot` with the whole text
  replaces it; a `tool` event comes where a tool started, after the text sent before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from api.errors import ApiError
from api.sse import EventStream
from core.domain.attachments import Image, MessageInput
from core.domain.clarifying import Answer
from core.domain.tools import ToolSpec

T = TypeVar("T")
Body = dict[str, Any]
Flight = tuple[str, str]
"""(client, idempotency key): the requests that must be answered at most once."""


class Relay:
    """Streamed text on its way to a client: deltas while the stream is open.

    Text that arrives before the stream is open is kept and sent when it opens, so
    appending every `delta` always rebuilds exactly the text so far.
    """

    def __init__(self) -> None:
        self._events: EventStream | None = None
        self._sent = ""
        self._latest = ""

    async def on_text(self, text: str) -> None:
        self._latest = text
        await self._flush()

    async def on_tool(self, spec: ToolSpec) -> None:
        """Send a `tool` event for a tool that starts; one that starts before the stream
        is open is not sent (the `done` reply lists it in `toolCalls`)."""
        if self._events is None:
            return
        await self._flush()
        await self._events.send(
            "tool", {"name": spec.name, "server": spec.server, "tool": spec.tool}
        )

    async def attach(self, events: EventStream) -> None:
        self._events = events
        await self._flush()

    async def _flush(self) -> None:
        if self._events is None:
            return
        text = self._latest
        if text.startswith(self._sent):
            piece, kind = text[len(self._sent) :], "delta"
        else:  # the seam of a continuation was rewritten: send the whole text again
            piece, kind = text, "snapshot"
        self._sent = text
        if piece:
            await self._events.send(kind, {"content": piece})


class RoundTask:
    """One request's round, run by a task of its own and awaited by the request (and,
    with an idempotency key, by every retry that arrives while it runs).

    `session` resolves once the session is vetted (or fails with the refusal);
    `result` resolves with the response body (or fails with the error).
    """

    def __init__(self, fingerprint: str | None, relay: Relay | None) -> None:
        loop = asyncio.get_running_loop()
        self.fingerprint = fingerprint
        self.relay = relay
        self.replayed = False
        self.session: asyncio.Future[str] = loop.create_future()
        self.result: asyncio.Future[Body] = loop.create_future()
        for future in (self.session, self.result):  # a client that left retrieves nothing
            future.add_done_callback(_retrieve)

    def refuse(self, error: ApiError) -> None:
        if not self.session.done():
            self.session.set_exception(error)
        elif not self.result.done():
            self.result.set_exception(error)

    def replay(self, session_id: str, body: Body) -> None:
        """Answer with a reply given before: this request causes no round."""
        self.replayed = True
        self.session.set_result(session_id)
        self.result.set_result(body)


@dataclass(frozen=True, slots=True)
class Message:
    """The round's user message: the text to store, with files what was read, and the
    answers to the session's last questions that go before the text."""

    text: str
    read: MessageInput | None = None
    answers: tuple[Answer, ...] = ()

    @property
    def images(self) -> tuple[Image, ...]:
        return self.read.images if self.read is not None else ()


async def shielded(future: Awaitable[T]) -> T:
    """Await a round task's outcome; a request cancelled meanwhile leaves the task running."""
    return await asyncio.shield(future)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
