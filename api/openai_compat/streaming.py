"""A reply to a chat app streamed as `chat.completion.chunk` events, then `data: [DONE]`.

Invariants:
- the stream opens only once the reply's first text is there, or the reply is done: a
  failure before that is a plain JSON error with its own status (the caller's `reply_of`
  raises it), one after it an `error` object in the stream, which the `openai` package
  raises;
- the chunks append to exactly the content the same reply has sent whole
  (`api.openai_compat.shapes.content_of`): text that grows as a continuation of what was
  sent streams as it comes, the rest (a round's Markdown, the sources, the closing line)
  follows in one piece; the role is in the first delta, `finish_reason` in the last choice
  chunk, then the usage chunk when asked;
- waiting never stops the reply: its task runs on when the client leaves.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from api.openai_compat.errors import OpenAIError, failure
from api.openai_compat.shapes import chunk, consultation_of, content_of, finish_reason, usage_of
from api.sse import EventStream
from core.domain.outcomes import Reply

log = logging.getLogger(__name__)


class LiveText:
    """The reply's text so far, as the engine streams it, and a flag raised as it grows."""

    def __init__(self) -> None:
        self.text = ""
        self.changed = asyncio.Event()

    async def on_text(self, text: str) -> None:
        self.text = text
        self.changed.set()


@dataclass(frozen=True, slots=True)
class ChunkIds:
    """What every chunk of one completion repeats."""

    completion_id: str
    model: str
    created: int

    def shaped(
        self,
        delta: dict[str, Any] | None = None,
        finish: str | None = None,
        usage: dict[str, int] | None = None,
        consultation: dict[str, Any] | None = None,
    ) -> str:
        body = chunk(
            completion_id=self.completion_id,
            model=self.model,
            created=self.created,
            delta=delta,
            finish=finish,
            usage=usage,
            consultation=consultation,
        )
        return json.dumps(body, ensure_ascii=False)


async def reply_of(task: asyncio.Task[Reply]) -> Reply:
    """The task's reply, or its failure as an OpenAI error; leaving does not stop it."""
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise failure(exc) from None


async def stream_reply(
    request: web.Request,
    task: asyncio.Task[Reply],
    live: LiveText,
    ids: ChunkIds,
    *,
    include_usage: bool,
) -> web.StreamResponse:
    """Stream the reply `task` writes (its text as `live` hears it) to the client."""
    events: EventStream | None = None
    sent = ""

    async def opened() -> EventStream:
        stream = EventStream(request)
        await stream.open()
        await stream.data(ids.shaped(delta={"role": "assistant", "content": ""}))
        return stream

    while not task.done():
        waiter = asyncio.ensure_future(live.changed.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        live.changed.clear()
        if task.done() or not live.text.startswith(sent) or live.text == sent:
            continue
        if events is None:
            events = await opened()
        piece, sent = live.text[len(sent) :], live.text
        await events.data(ids.shaped(delta={"content": piece}))
    try:
        reply = await reply_of(task)
    except OpenAIError as error:
        if events is None:
            raise
        await events.data(json.dumps(error.body(), ensure_ascii=False))
        await events.close()
        return events.response
    if events is None:
        events = await opened()
    content = content_of(reply)
    if content.startswith(sent):
        rest = content[len(sent) :]
    else:  # a continuation rewrote text already sent: the rest cannot mend it
        log.warning("streamed text of %s differs from its reply", reply.consultation_id)
        rest = ""
    if rest:
        await events.data(ids.shaped(delta={"content": rest}))
    finish = finish_reason(reply)
    await events.data(ids.shaped(delta={}, finish=finish, consultation=consultation_of(reply)))
    if include_usage:
        await events.data(ids.shaped(usage=usage_of(reply)))
    await events.data("[DONE]")
    await events.close()
    return events.response
