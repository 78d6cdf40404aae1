"""A fake OpenAI-compatible chat completions server on 127.0.0.1.

Invariant: every request body is recorded in `requests` before any reply (or
error) is sent, and scripted replies are consumed strictly in FIFO order; when
none is queued, `default_reply` answers after `latency` seconds. Streaming
replies use the real OpenAI chunk format, so the real openai SDK can talk to it.

A user message's content may be a string or, as OpenAI accepts, a list of content parts
(`text`, `image_url`); bodies are recorded as sent, so tests can see the image parts.
`reject_images` makes it refuse image parts the way a text-only server does.

Structured output: a request whose `response_format` is the `json_schema` named
`clarifying_round` (or `json_object` with that schema, llama-cpp-python's form:
`schema_asked`) gets, by default, the default reply shaped as such a round: its
text (whitespace collapsed) as the one question, without options (`echo_round`), so
the engine shows the echo text; one for `client_facts` gets `{"facts": []}` (nothing
to remember), and the same request asked in text (one fact a line) gets "none"; every
other request's default reply is the `default_reply` text as it is (an "answer" schema
or `json_object` included).
`refuse_format` makes the server refuse every `json_schema` request the way a server
without structured output does (`FORMAT_ERRORS`), before any scripted reply is
consumed, and answer `json_object` ones as usual: `"llama-cpp-python-500"` is
llama-cpp-python's server, which takes the schema in `json_object` instead.
`ignore_format` makes it answer prose whatever the format asked for (a server that
ignores `response_format`).
Scripted replies are sent as scripted (`enqueue_round` writes a round's JSON).

Tool calls: `enqueue_calls` scripts a reply asking for tool calls, streamed as real servers
do (`TOOL_STYLES`: OpenAI's index, id and name first and the arguments in pieces;
llama.cpp's server's whole call in one delta; a server leaving out `index`), ended by
finish_reason "tool_calls". A request after tool results (its last messages are `tool`
ones) gets, by default, the echo reply followed by each result (`echo_reply`).
`refuse_tools` makes the server refuse every request offering `tools` the way a server
without function calling does (`TOOL_ERRORS`); `empty_stream_with_tools` answers a streamed
request offering them with 200 and an empty body, as llama-cpp-python's server does with
`--chat_format chatml-function-calling` (its handler raises "Automatic streaming tool
choice is not supported" after the status went out); a server that ignores `tools` is the
default: it answers what is scripted.

Embeddings (`POST /v1/embeddings`) are `fakes.embeddings`' vectors, recorded in
`embedding_requests`; `embedding_fault` breaks them as a faulty provider would.

Standalone, for the benchmark: ``python -m fakes.model_server --port N --latency S``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web

from core.domain.clarifying import ROUND_SCHEMA, SCHEMA_NAME
from core.domain.facts import FACTS_SCHEMA
from core.domain.facts import SCHEMA_NAME as FACTS_SCHEMA_NAME
from core.prompting.prompts import PromptLibrary
from fakes import embeddings
from fakes.serving import LOOPBACK, LocalServer, until_stopped

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}

CONTEXT_ERRORS = {
    # What real servers answer (HTTP 400) to a prompt over the model's context: (message, code).
    "openai": (
        "This model's maximum context length is 8192 tokens. However, your messages resulted "
        "in 9120 tokens. Please reduce the length of the messages.",
        "context_length_exceeded",
    ),
    "llama.cpp": ("the request exceeds the available context size, try increasing it", None),
    "llama.cpp-window": ("Requested tokens (9120) exceed context window of 8192", None),
    "vllm": (
        "This model's maximum context length is 4096 tokens. However, you requested 5000 "
        "tokens (4000 in the messages, 1000 in the completion). Please reduce the length of "
        "the messages or completion.",
        "BadRequestError",
    ),
}
"""Enqueue one with `enqueue(message, status=400, error_code=code)`."""

IMAGE_ERRORS = {
    # What real servers answer to image parts for a model that reads text only:
    # (status, message, code).
    "openai": (
        400,
        "Invalid content type. image_url is only supported by certain models.",
        "invalid_request_error",
    ),
    "llama.cpp": (
        500,
        "image input is not supported - hint: if this is unexpected, you may need to provide "
        "the mmproj",
        None,
    ),
    "groq": (
        400,
        "'messages.1' : for 'role:user' the following must be satisfied"
        "[('messages.1.content' : value must be a string)]",
        None,
    ),
    "deepseek": (
        400,
        "Failed to deserialize the JSON body into the target type: messages[1]: unknown "
        "variant `image_url`, expected `text` at line 1 column 746",
        "invalid_request_error",
    ),
    "vllm": (400, "Qwen2ForCausalLM is not a multimodal model", "BadRequestError"),
}
"""Set `FakeModelServer.reject_images` to one of these keys."""

FORMAT_ERRORS: dict[str, tuple[int | None, str, str | None]] = {
    # What real servers without structured output answer to `response_format: json_schema`:
    # (status, message, code); status None: the server hangs up without any response.
    "openai": (
        400,
        "Invalid parameter: 'response_format' of type 'json_schema' is not supported with "
        "this model.",
        None,
    ),
    # vLLM answers a request its model validation refuses with 400 and an OpenAI-style
    # body (a version whose response_format lacks json_schema).
    "vllm": (
        400,
        "1 validation error for ChatCompletionRequest\nresponse_format.type\n  Input should "
        "be 'text' or 'json_object' [type=literal_error, input_value='json_schema', "
        "input_type=str]",
        "BadRequestError",
    ),
    # A FastAPI server whose request model lacks json_schema: pydantic's 422, with FastAPI's
    # `{"detail": [...]}` body instead of an OpenAI-style error.
    "fastapi": (422, "Input should be 'text' or 'json_object'", None),
    # llama-cpp-python: its validation error handler fails, so the connection just ends.
    "llama-cpp-python": (None, "", None),
    # llama-cpp-python's server as its source reads (llama_cpp/server/errors.py,
    # RouteErrorHandler): the request model's `response_format` takes only "text" and
    # "json_object", and FastAPI's validation error is wrapped as a 500 with its words.
    # The same server takes `{"type": "json_object", "schema": …}` and enforces the
    # schema with a grammar (llama_chat_format._grammar_for_response_format).
    "llama-cpp-python-500": (
        500,
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
        "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", "
        "'input': 'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}\n"
        "    POST /v1/chat/completions",
        None,
    ),
}
"""Set `FakeModelServer.refuse_format` to one of these keys, or script one refusal with
`enqueue(format_error=key)`."""

TOOL_ERRORS: dict[str, tuple[int, str]] = {
    # What servers without function calling answer to a request offering `tools`.
    "openai": (400, "'tools' is not supported with this model."),
    "vllm": (
        400,
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    ),
    "llama.cpp": (400, "tools param requires --jinja flag"),
    "ollama": (400, "registry.ollama.ai/library/gemma:2b does not support tools"),
    # A FastAPI server whose request model lacks tools (pydantic's 422, FastAPI's body).
    "fastapi": (422, "Extra inputs are not permitted"),
}
"""Set `FakeModelServer.refuse_tools` to one of these keys."""

TOOL_STYLES = ("openai", "whole", "no_index")
"""How `enqueue_calls` streams its calls: OpenAI's (`index`, `id`, `type` and the name in
a call's first delta, its arguments in `chunk_size` pieces after, each with its index);
llama.cpp's server's (each call whole in one delta); or OpenAI's without `index`."""


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """One tool call a scripted reply asks for: `arguments` as the model writes them
    (JSON text, or anything else to play a model writing invalid arguments)."""

    name: str
    arguments: str = "{}"
    id: str | None = None


@dataclass(slots=True)
class ScriptedReply:
    text: str
    finish_reason: str | None = "stop"
    status: int | None = None
    delay: float = 0.0
    chunk_size: int = 8
    extras: dict[str, Any] | None = None
    usage: dict[str, int] | None = None
    error_after: int | None = None  # stream this many chunks, then an error event
    headers: dict[str, str] | None = None
    chunk_delay: float = 0.0  # pause before each streamed content chunk (a slow stream)
    # Habits of real servers and proxies:
    stop_early: bool = False  # content, then the connection ends: no finish_reason, no [DONE]
    no_usage: bool = False  # ignore stream_options.include_usage (llama.cpp's server does)
    keepalive_only: float | None = None  # send only ": keep-alive" comments, this often, forever
    endless: bool = False  # repeat the text as content chunks forever (paced by chunk_delay)
    raw_events: list[bytes] | None = None  # sent as they are after the role chunk, then EOF
    hold: asyncio.Event | None = None  # the reply waits until the test sets it (or the stop)
    error_code: str | None = None  # the error body's "code" (default: the status as text)
    # Hang up without any response (llama-cpp-python's server does so on a request its
    # validation refuses, e.g. response_format json_schema: its error handler fails).
    drop: bool = False
    # A key of FORMAT_ERRORS: this reply is that server's refusal of the response format
    # (whatever the request asked for). Structured replies are scripted as their JSON text
    # (`enqueue_round`); JSON cut off by the token limit is a prefix of it with
    # finish_reason "length" (`enqueue_round(..., cut_at=n)`).
    format_error: str | None = None
    tool_calls: tuple[ScriptedCall, ...] = ()  # streamed after the text (`enqueue_calls`)
    tool_style: str = "openai"  # one of TOOL_STYLES
    # After `raw_events`, the connection is cut mid-body instead of ended: a server or a
    # proxy that dies halfway through an answer.
    break_off: bool = False


def text_of(content: Any) -> str:
    """A message's text: the string, or its text parts joined (image parts left out)."""
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return content if isinstance(content, str) else json.dumps(content)


def image_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The image parts of one message as sent (none for string content)."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict) and p.get("type") == "image_url"]


def _last_user_content(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            return text_of(message.get("content"))
    return ""


def echo_reply(body: dict[str, Any]) -> str:
    """The default answer: deterministic, so tests can predict it; after tool results,
    followed by each (" | tool: <result>")."""
    reply = f"Reply to: {_last_user_content(body)}"
    results = tool_results(body)
    return reply + "".join(f" | tool: {result}" for result in results)


def tool_results(body: dict[str, Any]) -> list[str]:
    """The contents of the `tool` messages that end a request (none when the last message
    is another's)."""
    found: list[str] = []
    for message in reversed(body.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "tool":
            break
        found.append(text_of(message.get("content")))
    return found[::-1]


RoundQuestion = tuple[str, Sequence[str]] | dict[str, Any]
"""A question of a scripted round: (text, options), or the JSON object itself."""


def round_json(
    preamble: str, questions: Sequence[RoundQuestion], ready_for_final: bool = False
) -> str:
    """The JSON text of a clarifying round, as a model following its schema writes it."""
    items = [q if isinstance(q, dict) else {"text": q[0], "options": list(q[1])} for q in questions]
    value = {"preamble": preamble, "questions": items, "ready_for_final": ready_for_final}
    return json.dumps(value, ensure_ascii=False)


def prose_round(text: str) -> str:
    """`text` as a clarifying round: its one question, on one line, without options (a
    text that already is a JSON object is left as it is)."""
    with contextlib.suppress(ValueError):
        if isinstance(json.loads(text), dict):
            return text
    return round_json("", [(" ".join(text.split()), [])])


def echo_round(body: dict[str, Any]) -> str:
    """The default answer to a request for a clarifying round: `echo_reply` as its only
    question, so the round shows as the echo text (whitespace collapsed)."""
    return prose_round(echo_reply(body))


def response_format_of(body: dict[str, Any]) -> str | None:
    """What a request asked for: the json_schema's name ("json_schema" when unnamed), or
    the response format's type ("json_object", "text"); None without a response format."""
    value = body.get("response_format")
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    if kind == "json_schema":
        schema = value.get("json_schema")
        name = schema.get("name") if isinstance(schema, dict) else None
        return name if isinstance(name, str) and name else "json_schema"
    return kind if isinstance(kind, str) else None


def schema_asked(body: dict[str, Any]) -> str | None:
    """The name of the schema a request asks its reply to follow: the json_schema's name,
    or, for `json_object` with a `schema` (llama-cpp-python's form), the name of the
    engine's schema it is (a clarifying round's, client memory's; "schema" for another);
    None when it asks for none."""
    value = body.get("response_format")
    if isinstance(value, dict) and value.get("type") == "json_object" and "schema" in value:
        known = {json.dumps(ROUND_SCHEMA): SCHEMA_NAME, json.dumps(FACTS_SCHEMA): FACTS_SCHEMA_NAME}
        return known.get(json.dumps(value["schema"]), "schema")
    kind = response_format_of(body)
    return kind if kind not in (None, "json_object", "text") else None


def _asks_json_schema(body: dict[str, Any]) -> bool:
    value = body.get("response_format")
    return isinstance(value, dict) and value.get("type") == "json_schema"


class FakeModelServer:
    """Scripted OpenAI-compatible server; `enqueue` replies, read `requests` afterwards."""

    def __init__(self, *, port: int = 0, latency: float = 0.0) -> None:
        self.host = LOOPBACK
        self.port = port
        self.latency = latency
        self.default_reply: Callable[[dict[str, Any]], str] = echo_reply
        self.hold: asyncio.Event | None = None  # default replies wait until it is set
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []  # each chat request's, names lowercased
        # `GET /v1/models` lists these ids; None: no such endpoint (404), like some providers.
        self.models: list[str] | None = None
        self.refuse_key = False  # `GET /v1/models` answers 401, as for a wrong API key
        # A key of IMAGE_ERRORS: requests with image parts get that server's refusal.
        self.reject_images: str | None = None
        # A key of FORMAT_ERRORS: every json_schema request gets that server's refusal
        # (no scripted reply consumed); requests without one are answered as usual.
        self.refuse_format: str | None = None
        # Answer as if no response format was asked for: the default reply is prose.
        self.ignore_format = False
        # A key of TOOL_ERRORS: every request offering tools gets that server's refusal
        # (no scripted reply consumed).
        self.refuse_tools: str | None = None
        # True: every streamed request offering tools gets 200 and an empty body.
        self.empty_stream_with_tools = False
        # `POST /v1/embeddings` bodies, apart from the chat requests above.
        self.embedding_requests: list[dict[str, Any]] = []
        # A key of `fakes.embeddings.FAULTS`: every embeddings answer broken that way.
        self.embedding_fault: str | None = None
        self._queue: deque[ScriptedReply] = deque()
        self._ids = itertools.count(1)
        self._server: LocalServer | None = None
        self._closing = asyncio.Event()
        self._arrived = asyncio.Event()  # replaced by a fresh one after each request

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def enqueue(
        self,
        text: str = "",
        finish_reason: str | None = "stop",
        *,
        status: int | None = None,
        delay: float = 0.0,
        chunk_size: int = 8,
        extras: dict[str, Any] | None = None,
        usage: dict[str, int] | None = None,
        error_after: int | None = None,
        headers: dict[str, str] | None = None,
        chunk_delay: float = 0.0,
        stop_early: bool = False,
        no_usage: bool = False,
        keepalive_only: float | None = None,
        endless: bool = False,
        raw_events: list[bytes] | None = None,
        hold: asyncio.Event | None = None,
        error_code: str | None = None,
        drop: bool = False,
        format_error: str | None = None,
        break_off: bool = False,
    ) -> None:
        """Script the next reply; `status` (e.g. 500, 429) makes it an OpenAI-style error.

        `chunk_delay` paces a streamed reply: each content chunk waits that long.
        `stop_early`, `no_usage`, `keepalive_only`, `endless` and `raw_events` reproduce
        what real servers and proxies do (see `ScriptedReply`); the last three only
        end when the client hangs up or the server stops. `hold` makes the reply wait
        until the test sets that event, so a test can act while a call is in progress.
        `format_error` (a key of FORMAT_ERRORS) makes it that server's refusal of the
        response format.
        """
        if format_error is not None and format_error not in FORMAT_ERRORS:
            raise KeyError(f"no such format error: {format_error}")
        self._queue.append(
            ScriptedReply(
                text,
                finish_reason,
                status,
                delay,
                max(1, chunk_size),
                extras,
                usage,
                error_after,
                headers,
                chunk_delay,
                stop_early,
                no_usage,
                keepalive_only,
                endless,
                raw_events,
                hold,
                error_code,
                drop,
                format_error,
                break_off=break_off,
            )
        )

    def enqueue_calls(
        self, *calls: ScriptedCall, text: str = "", style: str = "openai", **kw: Any
    ) -> None:
        """Script a reply asking for `calls` (after `text`, usually none), streamed in
        `style` (one of TOOL_STYLES); other keywords are `enqueue`'s."""
        if style not in TOOL_STYLES:
            raise KeyError(f"no such tool style: {style}")
        self.enqueue(text, kw.pop("finish_reason", "tool_calls"), **kw)
        scripted = self._queue[-1]
        scripted.tool_calls, scripted.tool_style = tuple(calls), style

    def enqueue_round(
        self,
        preamble: str,
        questions: Sequence[RoundQuestion],
        ready_for_final: bool = False,
        *,
        cut_at: int | None = None,
        **kw: Any,
    ) -> str:
        """Script a clarifying round as its JSON text and return that text; `cut_at` keeps
        only its first `cut_at` characters, ended by finish_reason "length" (a round cut
        off by the token limit). Other keywords are `enqueue`'s."""
        text = round_json(preamble, questions, ready_for_final)
        if cut_at is not None:
            text = text[:cut_at]
            kw["finish_reason"] = "length"
        self.enqueue(text, **kw)
        return text

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        return len(self._queue)

    async def wait_requests(self, count: int, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Wait until `count` requests in total have arrived (recorded, not yet answered)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.requests) < count:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise TimeoutError(f"{len(self.requests)} of {count} model requests arrived")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)

    def build_app(self) -> web.Application:
        """The chat completions and models routes (a subclass may serve others)."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        return app

    async def start(self) -> None:
        self._server = LocalServer(self.build_app(), port=self.port)
        await self._server.start()
        self.port = self._server.port

    async def stop(self) -> None:
        # Set first: handlers still sleeping on a delay wake up, so the short shutdown holds.
        self._closing.set()
        if self._server is not None:
            await self._server.stop()

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but wake at once when the server stops (so shutdown never hangs)."""
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), seconds)

    async def _until_set(self, event: asyncio.Event) -> None:
        """Wait for `event`, or for the server to stop."""
        waiters = [asyncio.ensure_future(e.wait()) for e in (event, self._closing)]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _models(self, request: web.Request) -> web.Response:
        if self.refuse_key:
            return _error(401, "Incorrect API key provided", {})
        if self.models is None:
            raise web.HTTPNotFound()
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
        return web.json_response({"object": "list", "data": data})

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        """`fakes.embeddings`: OpenAI's answer, or the fault `embedding_fault` names."""
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "body is not JSON", {})
        self.embedding_requests.append(body)
        fault = self.embedding_fault
        if fault not in (None, *embeddings.FAULTS):
            raise KeyError(f"no such embeddings fault: {fault}")
        if fault == "outage":
            return _error(500, "The server had an error while processing your request.", {})
        refusal = embeddings.refusal(body)
        if refusal is not None:
            return _error(400, refusal, {}, param="input")
        if fault == "slow":
            await self._until_set(asyncio.Event())
            return web.Response(status=503)
        if fault == "huge":
            return await self._endless_body(request)
        return web.json_response(embeddings.answer(body, fault))

    async def _endless_body(self, request: web.Request) -> web.StreamResponse:
        """A JSON body that starts well and never ends, until the client hangs up."""
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"object": "list", "data": [{"embedding": [')
        block = b"0.125, " * 8192
        with contextlib.suppress(ConnectionError):
            while not self._closing.is_set():
                await response.write(block)
        return response

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "body is not JSON", {})
        self.requests.append(body)
        self.request_headers.append({k.lower(): v for k, v in request.headers.items()})
        self._arrived.set()
        self._arrived = asyncio.Event()
        if self.reject_images is not None and any(
            image_parts(m) for m in body.get("messages") or [] if isinstance(m, dict)
        ):
            status, refusal, code = IMAGE_ERRORS[self.reject_images]
            return _error(status, refusal, {}, code)
        if self.refuse_format is not None and _asks_json_schema(body):
            return _format_error(request, self.refuse_format)
        if self.refuse_tools is not None and body.get("tools"):
            return _tools_error(self.refuse_tools)
        if self.empty_stream_with_tools and body.get("tools") and body.get("stream"):
            empty = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await empty.prepare(request)
            await empty.write_eof()
            return empty
        if self._queue:
            reply = self._queue.popleft()
        else:
            reply = ScriptedReply(
                self._default_text(body), delay=self.latency, chunk_size=16, hold=self.hold
            )
        if reply.hold is not None:
            await self._until_set(reply.hold)
        await self._sleep(reply.delay)
        if reply.format_error is not None:
            return _format_error(request, reply.format_error)
        if reply.drop:
            assert request.transport is not None
            request.transport.abort()  # no status line, nothing: the client sees a hang-up
            return web.Response()
        if reply.status is not None and reply.status >= 400:
            return _error(
                reply.status,
                reply.text or f"scripted error {reply.status}",
                reply.headers or {},
                reply.error_code,
            )
        usage = reply.usage or _usage(body, reply.text)
        model = str(body.get("model", "fake-model"))
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            if reply.no_usage:
                include_usage = False
            return await self._stream(request, reply, model, usage if include_usage else None)
        message = {"role": "assistant", "content": reply.text}
        payload = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": usage,
            **(reply.extras or {}),
        }
        return web.json_response(payload, headers=reply.headers)

    def _default_text(self, body: dict[str, Any]) -> str:
        """The default reply, as a clarifying round when one was asked for (see the module)."""
        text = self.default_reply(body)
        if not self.ignore_format and schema_asked(body) == SCHEMA_NAME:
            return prose_round(text)
        if not self.ignore_format and schema_asked(body) == FACTS_SCHEMA_NAME:
            return json.dumps({"facts": []})  # nothing worth remembering
        if _asks_facts_in_text(body):
            return "none"  # the same, one fact a line
        return text

    async def _stream(
        self, request: web.Request, reply: ScriptedReply, model: str, usage: dict[str, int] | None
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                **(reply.headers or {}),
            }
        )
        await response.prepare(request)
        base = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            **(reply.extras or {}),
        }

        def event(choices: list[dict[str, Any]], **more: Any) -> bytes:
            return b"data: " + json.dumps({**base, "choices": choices, **more}).encode() + b"\n\n"

        def choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
            return [{"index": 0, "delta": delta, "finish_reason": finish}]

        parts = [event(choice({"role": "assistant", "content": ""}))]
        if reply.keepalive_only is not None or reply.endless or reply.raw_events is not None:
            await response.write(parts[0])
            await self._misbehave(
                request, response, reply, lambda piece: event(choice({"content": piece}))
            )
            return response
        for n, piece in enumerate(_chunks(reply.text, reply.chunk_size)):
            if reply.error_after is not None and n == reply.error_after:
                break
            parts.append(event(choice({"content": piece})))
        for delta in _call_deltas(reply):
            parts.append(event(choice({"tool_calls": [delta]})))
        if reply.error_after is not None:
            error = {"message": "scripted mid-stream failure", "type": "server_error"}
            parts.append(b"data: " + json.dumps({"error": error}).encode() + b"\n\n")
            await response.write(b"".join(parts))
            await response.write_eof()
            return response
        if not reply.stop_early:
            parts.append(event(choice({}, reply.finish_reason)))
            if usage is not None:
                parts.append(event([], usage=usage))
            parts.append(b"data: [DONE]\n\n")
        paced = range(1, 1 + len(_chunks(reply.text, reply.chunk_size)))  # the content events
        for n, part in enumerate(parts):  # one write per event, as a provider sends them
            if reply.chunk_delay and n in paced:
                await self._sleep(reply.chunk_delay)
            await response.write(part)
        await response.write_eof()
        return response

    async def _misbehave(
        self,
        request: web.Request,
        response: web.StreamResponse,
        reply: ScriptedReply,
        content_event: Callable[[str], bytes],
    ) -> None:
        """Keep-alives or content forever, or raw events; ends when the client hangs up."""
        with contextlib.suppress(ConnectionError):
            if reply.raw_events is not None:
                for raw in reply.raw_events:
                    await self._sleep(reply.chunk_delay)
                    await response.write(raw)
                if reply.break_off and request.transport is not None:
                    request.transport.abort()  # the chunked body never ends
                    return
                await response.write_eof()
                return
            pieces = _chunks(reply.text or "x", reply.chunk_size)
            while not self._closing.is_set():
                if reply.keepalive_only is not None:
                    await self._sleep(reply.keepalive_only)
                    await response.write(b": keep-alive\n\n")
                else:
                    for piece in pieces:
                        await self._sleep(reply.chunk_delay)
                        await response.write(content_event(piece))
                    await asyncio.sleep(0)  # let the server notice a hang-up


def _call_deltas(reply: ScriptedReply) -> list[dict[str, Any]]:
    """The `tool_calls` entries streaming the reply's calls, one a delta (`TOOL_STYLES`)."""
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(reply.tool_calls):
        call_id = call.id or f"call_{index + 1}"
        head = {"id": call_id, "type": "function"}
        if reply.tool_style == "whole":
            function = {"name": call.name, "arguments": call.arguments}
            deltas.append({"index": index, **head, "function": function})
            continue
        where = {"index": index} if reply.tool_style == "openai" else {}
        deltas.append({**where, **head, "function": {"name": call.name, "arguments": ""}})
        for piece in _chunks(call.arguments, reply.chunk_size):
            deltas.append({**where, "function": {"arguments": piece}})
    return deltas


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage(body: dict[str, Any], text: str) -> dict[str, int]:
    prompt = sum(len(text_of(m.get("content", "")).split()) for m in body.get("messages") or [])
    completion = len(text.split())
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _error(
    status: int,
    message: str,
    headers: dict[str, str],
    code: str | None = None,
    param: str | None = None,
) -> web.Response:
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    # retry-after-ms keeps the SDK's retry waits tiny in tests.
    headers = {"retry-after-ms": "1", **headers}
    error = {"message": message, "type": kind, "param": param, "code": code or str(status)}
    return web.json_response({"error": error}, status=status, headers=headers)


def _tools_error(server: str) -> web.Response:
    """Server `server`'s refusal of `tools` (a key of TOOL_ERRORS)."""
    status, message = TOOL_ERRORS[server]
    if status == 422:
        detail = {"type": "extra_forbidden", "loc": ["body", "tools"], "msg": message}
        return web.json_response({"detail": [detail]}, status=status)
    return _error(status, message, {}, None, "tools")


def _format_error(request: web.Request, server: str) -> web.Response:
    """Server `server`'s refusal of a response format (a key of FORMAT_ERRORS)."""
    status, message, code = FORMAT_ERRORS[server]
    if status is None:
        assert request.transport is not None
        request.transport.abort()  # no status line, nothing: the client sees a hang-up
        return web.Response()
    if status == 422:
        loc = ["body", "response_format", "type"]
        detail = {"type": "literal_error", "loc": loc, "msg": message, "input": "json_schema"}
        return web.json_response({"detail": [detail]}, status=status)
    return _error(status, message, {}, code, "response_format")


@pytest.fixture
async def model_server() -> AsyncIterator[FakeModelServer]:
    """A started fake model server, stopped after the test."""
    server = FakeModelServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def _serve(port: int, latency: float) -> None:
    server = FakeModelServer(port=port, latency=latency)
    await server.start()
    print(f"fake model server on {server.base_url} (latency {latency}s)", flush=True)
    try:
        await until_stopped()
    finally:
        await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8900)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.port, args.latency))


@functools.cache
def _facts_opening() -> str:
    """The first line of the instruction that asks for a consultation's facts."""
    return PromptLibrary().extract_facts((), structured=False).split("\n", 1)[0]


def _asks_facts_in_text(body: dict[str, Any]) -> bool:
    """The request notes a finished consultation's facts in text (its system message is
    the extraction instruction), not a round or an answer."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
        return False
    first = messages[0]
    content = first.get("content")
    return (
        first.get("role") == "system"
        and isinstance(content, str)
        and content.startswith(_facts_opening())
    )


if __name__ == "__main__":
    main()
