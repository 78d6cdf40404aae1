"""The test fakes as benchmark processes, with the few control endpoints the driver needs.

`python -m bench.fakes telegram` serves `fakes.bot_api.FakeBotApi` plus
`GET /_bench/calls?since=I&wait=S`, a long poll that answers as soon as a call
past index I is recorded (so the load driver reacts within a millisecond without
spinning), and `POST /_bench/document?name=N` to store a file a message can carry.
`python -m bench.fakes model` serves `fakes.model_server.FakeModelServer`
plus `POST /_bench/mode` (latency, slow streaming, long answers), `GET /_bench/requests`,
`GET /_bench/embeddings` (how many `POST /v1/embeddings` it answered, and their texts),
`GET /_bench/formats?since=I` (the requests past index I counted by the response
format they asked for) and `GET /_bench/excerpts?since=I` (the same requests counted by
how many knowledge-base excerpts their system messages carry). In slow mode a request that
does not ask to stream gets the same words whole, once they would have finished streaming.
With the mode's `tool_call` set, a request offering that tool whose last message is not a
tool's result gets a streamed call of it, with the mode's `tool_arguments`.

Invariant: the first line a fake prints is `PORT <n>`, after it is listening on
127.0.0.1; every timestamp it reports is `time.monotonic()`, which on Linux is
the same clock in every process, so the driver can subtract them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web

from core.domain.clarifying import SCHEMA_NAME
from fakes.bot_api import FakeBotApi
from fakes.model_server import (
    FakeModelServer,
    ScriptedCall,
    ScriptedReply,
    _last_user_content,
    _usage,
    response_format_of,
    round_json,
)

LONG_ANSWER_REQUEST = "LONG-ANSWER"
"""A user message containing this gets the long answer when `long_chars` is set."""

MAIN_TOKEN = "123456:BENCH-TOKEN"
"""The deployment's own bot (TELEGRAM_BOT_TOKEN) in every run (`bench.runs.TOKEN`)."""

SLOW_WORDS = [f"word{i} " for i in range(20)]
"""The slow stream's reply, a word per piece."""


EXCERPT_LABEL = re.compile(r"^\[K(\d+)\] ", re.MULTILINE)
"""The line a knowledge-base excerpt starts with (`prompts/knowledge_excerpts.mustache`):
quoted excerpt text starts every line with "> ", so no passage forges one."""


def excerpts_in(body: dict[str, Any]) -> int:
    """How many knowledge-base excerpts a chat-completions request's system messages carry."""
    return sum(
        len(EXCERPT_LABEL.findall(str(message.get("content", ""))))
        for message in body.get("messages", [])
        if isinstance(message, dict) and message.get("role") == "system"
    )


class BenchBotApi(FakeBotApi):
    """The fake Bot API with a long-polling view of the calls."""

    def build_app(self) -> web.Application:
        """The fake Bot API's routes plus the long poll (routes freeze once serving)."""
        app = super().build_app()
        app.router.add_get("/_bench/calls", self._bench_calls)
        app.router.add_post("/_bench/document", self._bench_document)
        return app

    async def _bench_document(self, request: web.Request) -> web.Response:
        """Store the body as a file; answer the `document` a message carrying it needs."""
        name = request.query["name"]
        media = self.document(await request.read(), name, request.query.get("mime"))
        return web.json_response(media)

    async def _bench_calls(self, request: web.Request) -> web.Response:
        since = int(request.query.get("since", 0))
        wait = float(request.query.get("wait", 0))
        await self._until(lambda: len(self.calls) > since, wait)
        rows = [
            {
                "method": c.method,
                "chat_id": c.params.get("chat_id"),
                "monotonic": c.monotonic,
                "status": c.status,
                "token": c.token,
            }
            for c in self.calls[since:]
        ]
        return web.json_response({"next": since + len(rows), "calls": rows})


class BenchModel(FakeModelServer):
    """The fake model with a switchable latency and an optional slow, token-by-token stream."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stream_seconds = 0.0
        self.long_chars = 0  # > 0: LONG_ANSWER_REQUEST gets an answer this long ...
        self.long_piece = 4  # ... streamed in pieces of this many characters, unpaced
        self.first_tokens: list[dict[str, Any]] = []
        self.arrivals: list[float] = []  # time.monotonic() of each request, in order
        self.tool_call = ""  # a tool the model calls once a question when offered it ...
        self.tool_arguments = "{}"  # ... with these arguments (JSON)
        self.embeddings_answered = 0  # `POST /v1/embeddings` requests ...
        self.embedding_texts = 0  # ... and the texts they carried

    def build_app(self) -> web.Application:
        """Completions through the bench modes, the mode switch and the request log."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_post("/_bench/mode", self._mode)
        app.router.add_get("/_bench/requests", self._requests)
        app.router.add_get("/_bench/formats", self._formats)
        app.router.add_get("/_bench/excerpts", self._excerpts)
        app.router.add_post("/v1/embeddings", self._bench_embeddings)
        app.router.add_get("/_bench/embeddings", self._embedding_counts)
        return app

    async def _bench_embeddings(self, request: web.Request) -> web.StreamResponse:
        """`fakes.embeddings`' answer, counted; the bodies are not kept (a build of 100,000
        passages would keep 100 MB of them)."""
        response = await self._embeddings(request)
        self.embedding_texts += sum(
            len(body["input"]) if isinstance(body.get("input"), list) else 1
            for body in self.embedding_requests
            if isinstance(body, dict)
        )
        self.embeddings_answered += len(self.embedding_requests)
        self.embedding_requests.clear()
        return response

    async def _embedding_counts(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"requests": self.embeddings_answered, "texts": self.embedding_texts}
        )

    async def _mode(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.latency = float(body.get("latency", self.latency))
        self.stream_seconds = float(body.get("stream_seconds", self.stream_seconds))
        self.long_chars = int(body.get("long_chars", self.long_chars))
        self.long_piece = int(body.get("long_piece", self.long_piece))
        self.tool_call = str(body.get("tool_call", self.tool_call))
        self.tool_arguments = str(body.get("tool_arguments", self.tool_arguments))
        return web.json_response({"ok": True})

    async def _requests(self, request: web.Request) -> web.Response:
        since = int(request.query.get("since", 0))
        return web.json_response(
            {
                "requests": self.requests[since:],
                "arrivals": self.arrivals[since:],
                "first_tokens": self.first_tokens,
            }
        )

    async def _formats(self, request: web.Request) -> web.Response:
        since = int(request.query.get("since", 0))
        asked = Counter(response_format_of(body) or "none" for body in self.requests[since:])
        return web.json_response({"next": len(self.requests), "formats": dict(asked)})

    async def _excerpts(self, request: web.Request) -> web.Response:
        since = int(request.query.get("since", 0))
        carried = Counter(str(excerpts_in(body)) for body in self.requests[since:])
        return web.json_response({"next": len(self.requests), "excerpts": dict(carried)})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        self.arrivals.append(time.monotonic())
        if self.tool_call:
            body = await request.json()
            if _calls_for(body, self.tool_call):
                self.requests.append(body)
                call = ScriptedCall(self.tool_call, self.tool_arguments)
                reply = ScriptedReply("", "tool_calls", tool_calls=(call,))
                await asyncio.sleep(self.latency)
                return await self._stream(request, reply, str(body.get("model", "fake")), None)
        if self.stream_seconds <= 0 and self.long_chars <= 0:
            return await self._chat_completions(request)
        body = await request.json()  # aiohttp keeps the body: the ordinary path reads it again
        if self.long_chars > 0 and LONG_ANSWER_REQUEST in _last_user_content(body):
            self.requests.append(body)
            return await self._long_stream(request, body)
        if self.stream_seconds <= 0:
            return await self._chat_completions(request)
        self.requests.append(body)
        if not body.get("stream"):
            return await self._slow_whole(body)
        return await self._slow_stream(request, body)

    async def _long_stream(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        """`long_chars` characters of Markdown prose in `long_piece`-character chunks, at once.

        Every line is numbered: an answer repeating one line would be a loop, which the
        bot stops (`core.llm.repetition`)."""
        lines, size, n = [], 0, 0
        while size < self.long_chars:
            n += 1
            lines.append(f"- {n}. Check the **settings** of service {n}, then note what changed.\n")
            size += len(lines[-1])
        text = "".join(lines)[: self.long_chars]
        reply = ScriptedReply(text, chunk_size=max(1, self.long_piece))
        model = str(body.get("model", "fake"))
        return await self._stream(request, reply, model, None)

    async def _slow_whole(self, body: dict[str, Any]) -> web.Response:
        """The slow stream's twenty words for a client that did not ask to stream: the
        first word is written when it arrives, the whole reply sent `stream_seconds` later."""
        self.first_tokens.append({"user": _last_user_content(body), "monotonic": time.monotonic()})
        await asyncio.sleep(self.stream_seconds)
        text = "".join(SLOW_WORDS)
        if response_format_of(body) == SCHEMA_NAME:
            text = round_json(text, [("Which one?", [])])
        message = {"role": "assistant", "content": text}
        return web.json_response(
            {
                "id": "chatcmpl-slow",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": str(body.get("model", "fake")),
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": _usage(body, text),
            }
        )

    async def _slow_stream(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        """Twenty words spread over `stream_seconds`, as a slow provider streams them."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        user = _last_user_content(body)
        words = SLOW_WORDS
        base = {
            "id": "chatcmpl-slow",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": str(body.get("model", "fake")),
        }

        def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return b"data: " + json.dumps({**base, "choices": [choice]}).encode() + b"\n\n"

        # A clarifying round asked as JSON streams as a real server streams it: the words
        # are its preamble, between the object's opening and its question.
        structured = response_format_of(body) == SCHEMA_NAME
        await response.write(event({"role": "assistant", "content": ""}))
        if structured:
            await response.write(event({"content": '{"preamble": "'}))
        for n, word in enumerate(words):
            if n == 0:
                self.first_tokens.append({"user": user, "monotonic": time.monotonic()})
            await response.write(event({"content": word}))
            await asyncio.sleep(self.stream_seconds / len(words))
        if structured:
            closing = '", "questions": [{"text": "Which one?", "options": []}],'
            closing += ' "ready_for_final": false}'
            await response.write(event({"content": closing}))
        await response.write(event({}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _calls_for(body: dict[str, Any], tool: str) -> bool:
    """The request offers `tool` and its last message is not a tool's result."""
    offered = {
        (entry.get("function") or {}).get("name")
        for entry in body.get("tools") or []
        if isinstance(entry, dict)
    }
    messages = body.get("messages") or [{}]
    return tool in offered and messages[-1].get("role") != "tool"


def bench_tokens(count: int) -> dict[str, tuple[int, str]]:
    """The tokens of `count` bots the fake serves with `--bots`: the deployment's own
    (`MAIN_TOKEN`, the one bot's), then one per added bot, each its own id and username."""
    tokens = {MAIN_TOKEN: (int(MAIN_TOKEN.split(":")[0]), "consult_bot")}
    for n in range(1, count):
        tokens[f"{700000 + n}:BENCH-BOT-{n}"] = (700000 + n, f"bench_bot_{n}")
    return tokens


async def _serve(kind: str, latency: float, bots: int = 0) -> None:
    if kind == "telegram":
        server: FakeBotApi | BenchModel = BenchBotApi(tokens=bench_tokens(bots) if bots else None)
    else:
        server = BenchModel(latency=latency)
    await server.start()
    print(f"PORT {server.port}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


def _event_loop_runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    """uvloop's `run` when installed (the fakes then cost the benchmark less), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run


def main() -> None:
    parser = argparse.ArgumentParser(description="benchmark fakes")
    parser.add_argument("kind", choices=["telegram", "model"])
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument(
        "--bots", type=int, default=0, help="telegram: serve this many bots (`bench_tokens`)"
    )
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        _event_loop_runner()(_serve(args.kind, args.latency, args.bots))
    sys.exit(0)


if __name__ == "__main__":
    main()
