"""`POST /api/chat` and `POST /api/chat/stream`: one round of a session per request.

Invariants: both endpoints run the same steps and return the same object (the
stream's `done` event is exactly `/api/chat`'s body); every refusal that can be
known before the model is called (validation, limits, unknown or finished session)
is a plain JSON error with its own status, even on the streaming endpoint; a model
failure never consumes the round and its error names the session to retry.

`maxRounds` on a continuing request: omitted or equal to the session's limit changes
nothing; a different value is applied like Telegram's /rounds (validated the same
way; a limit at or below the rounds already used makes this reply the final one).
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from api.errors import ApiError, from_engine, json_response
from api.metrics import Metrics
from api.schemas import ChatRequest, ChatResponse, parse_chat_request
from api.sse import EventStream
from core.errors import ConsultationError, ModelError
from core.outcomes import Reply
from core.service import ConsultationService, OnText

log = logging.getLogger(__name__)

DRAIN_SECONDS = 30.0


class ChatEndpoints:
    """The two chat routes over one `ConsultationService`."""

    def __init__(
        self,
        service: ConsultationService,
        metrics: Metrics,
        *,
        max_rounds_limit: int,
        max_body_bytes: int,
        keepalive_seconds: float = 15.0,
    ) -> None:
        self._service = service
        self._metrics = metrics
        self._limit = max_rounds_limit
        self._max_body = max_body_bytes
        self._keepalive = keepalive_seconds
        self._tasks: set[asyncio.Task[Reply]] = set()

    async def chat(self, request: web.Request) -> web.Response:
        """Answer one round and return it as JSON."""
        body = await self._parse(request)
        session_id = await self._session_for(body, check=False)
        reply = await self._answer(session_id, body.message, on_text=None)
        return json_response(_response(reply))

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """Answer one round as Server-Sent Events: `delta`…, then `done` or `error`."""
        body = await self._parse(request)
        session_id = await self._session_for(body, check=True)
        events = EventStream(request, keepalive=self._keepalive)
        await events.open()
        sent = ""

        async def on_text(text: str) -> None:
            nonlocal sent
            if text.startswith(sent):
                piece, kind = text[len(sent) :], "delta"
            else:  # the seam of a continuation was rewritten: send the whole text again
                piece, kind = text, "snapshot"
            sent = text
            if piece:
                await events.send(kind, {"content": piece})

        try:
            reply = await self._answer(session_id, body.message, on_text=on_text)
        except ApiError as exc:
            await events.send("error", {**exc.body(), "status": exc.status})
        except Exception:
            log.exception("streamed chat request failed")
            error = ApiError("INTERNAL_ERROR", "internal error")
            await events.send("error", {**error.body(), "status": error.status})
        else:
            await events.send("done", _response(reply))
        finally:
            await events.close()
        return events.response

    async def _parse(self, request: web.Request) -> ChatRequest:
        length = request.content_length
        if length is not None and length > self._max_body:
            raise ApiError("PAYLOAD_TOO_LARGE", "the request body is too large")
        body = parse_chat_request(await request.read())  # aiohttp enforces client_max_size
        if body.max_rounds is not None and body.max_rounds > self._limit:
            raise ApiError(
                "MAX_ROUNDS_EXCEEDED", f"maxRounds: at most {self._limit} rounds are allowed"
            )
        return body

    async def _session_for(self, body: ChatRequest, *, check: bool) -> str:
        """Open a new session, or vet (and re-limit) an existing one; return its id."""
        try:
            if body.session_id is None:
                return await self._service.open_session(
                    body.message,
                    max_rounds=body.max_rounds or 1,
                    system_prompt=body.system_prompt,
                    options=body.options(),
                )
            if body.max_rounds is not None:
                await self._service.set_session_max_rounds(body.session_id, body.max_rounds)
            elif check:
                await self._service.check_session(body.session_id)
        except ConsultationError as exc:
            raise from_engine(exc) from None
        return body.session_id

    async def _answer(self, session_id: str, text: str, *, on_text: OnText | None) -> Reply:
        """Run the round in a task of its own: a client that hangs up (or a server that
        cancels handlers on disconnect) must not abort a round the model is answering."""
        task = asyncio.create_task(self._round(session_id, text, on_text))
        self._tasks.add(task)
        task.add_done_callback(self._forget)
        try:
            return await asyncio.shield(task)
        except (ConsultationError, ModelError) as exc:
            raise from_engine(exc, session_id) from None

    async def _round(self, session_id: str, text: str, on_text: OnText | None) -> Reply:
        try:
            reply = await self._service.continue_session(session_id, text, on_text=on_text)
        except ModelError as exc:
            log.warning("model error for session %s: %s", session_id, exc)
            raise
        self._metrics.record_reply(reply, source="api")
        return reply

    def _forget(self, task: asyncio.Task[Reply]) -> None:
        self._tasks.discard(task)
        error = None if task.cancelled() else task.exception()  # retrieved: never "lost"
        if error is not None and not isinstance(error, ConsultationError | ModelError):
            log.error("chat round failed", exc_info=error)

    async def drain(self, app: web.Application | None = None) -> None:
        """Let rounds still being answered finish (and be stored) before shutting down."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=DRAIN_SECONDS)


def _response(reply: Reply) -> dict[str, object]:
    return ChatResponse.from_reply(reply).model_dump(mode="json")
