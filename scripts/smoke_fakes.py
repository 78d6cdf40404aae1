"""The production smoke's stand-ins on 127.0.0.1: an OpenAI-compatible model and the
Telegram Bot API, written with aiohttp alone (a runtime dependency), so they run in an
install without the test extra.

Invariant: every request is recorded before it is answered. The model answers every chat
completion with "Reply to: <the last user message>" (streamed in the OpenAI chunk format
when asked), and a request for a JSON schema with a clarifying round of that one question.
The Bot API hands out the updates queued with `push` through long polling, answers
`sendMessage` and `sendDocument` with the message Telegram would return and keeps what
was sent, and answers every other method `true`.

Standalone, the model alone: ``python scripts/smoke_fakes.py --port N``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

LOOPBACK = "127.0.0.1"
BOT_TOKEN = "123456:SMOKE-TOKEN"
BOT_ID = 123456


class Served:
    """An aiohttp application listening on a free loopback port until `stop`."""

    def __init__(self, app: web.Application, port: int = 0) -> None:
        self._runner = web.AppRunner(app, access_log=None)
        self.port = port

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, LOOPBACK, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        await self._runner.cleanup()


def text_of(content: Any) -> str:
    """A message's text: the string, or its text parts joined."""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else json.dumps(content)


class FakeModel:
    """`/v1/chat/completions` and `/v1/models`; `requests` holds every body received."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        self.served = Served(app, port)

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.served.port}/v1"

    def sent_text(self) -> str:
        """Every message of every request, as one text (what the model was sent)."""
        return "\n".join(
            text_of(m.get("content")) for body in self.requests for m in body.get("messages", [])
        )

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": "smoke-model", "object": "model", "created": 0, "owned_by": "smoke"}]
        return web.json_response({"object": "list", "data": data})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        text = f"Reply to: {text_of(users[-1].get('content')) if users else ''}"
        schema = (body.get("response_format") or {}).get("json_schema") or {}
        if schema.get("name") == "clarifying_round":
            question = {"text": " ".join(text.split()), "options": []}
            text = json.dumps({"preamble": "", "questions": [question], "ready_for_final": False})
        elif schema.get("name") == "client_facts":
            text = json.dumps({"facts": []})
        model = str(body.get("model", "smoke-model"))
        words = sum(len(text_of(m.get("content")).split()) for m in body.get("messages", []))
        usage = {
            "prompt_tokens": words,
            "completion_tokens": len(text.split()),
            "total_tokens": words + len(text.split()),
        }
        base = {"id": f"chatcmpl-{next(self._ids)}", "created": int(time.time()), "model": model}
        if not body.get("stream"):
            choice = {"index": 0, "message": {"role": "assistant", "content": text}}
            payload = {
                **base,
                "object": "chat.completion",
                "choices": [{**choice, "finish_reason": "stop"}],
                "usage": usage,
            }
            return web.json_response(payload)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        def event(delta: dict[str, Any] | None, finish: str | None = None, **more: Any) -> bytes:
            choices = (
                [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            )
            chunk = {**base, "object": "chat.completion.chunk", "choices": choices, **more}
            return b"data: " + json.dumps(chunk).encode() + b"\n\n"

        await response.write(event({"role": "assistant", "content": ""}))
        for start in range(0, len(text), 16):
            await response.write(event({"content": text[start : start + 16]}))
        await response.write(event({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            await response.write(event(None, usage=usage))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


@dataclass
class Sent:
    """What the bot sent: a message's text, or a document's name and bytes."""

    method: str
    chat_id: int
    text: str = ""
    filename: str = ""
    data: bytes = b""


@dataclass
class FakeTelegram:
    """The Bot API's methods the bot calls, at `/bot<token>/<method>`."""

    updates: list[dict[str, Any]] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self._message_ids = itertools.count(1000)
        self._arrived = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/bot{token}/{method}", self._method)
        self.served = Served(app)

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.served.port}/bot"

    def push(self, text: str, *, user_id: int, language_code: str) -> None:
        """A private message from `user_id` whose Telegram client is in `language_code`."""
        user = {"id": user_id, "is_bot": False, "first_name": "Smoke"}
        user["language_code"] = language_code
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": user_id, "type": "private", "first_name": "Smoke"},
            "from": user,
            "text": text,
        }
        if text.startswith("/"):
            command = text.split()[0]
            message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(command)}]
        self.updates.append({"update_id": next(self._ids), "message": message})
        self._arrived.set()

    async def _method(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        self.methods.append(method)
        # The bot sends a JSON object of PTB's encoded values, or multipart with a file.
        json_body = request.content_type == "application/json"
        form = await request.json() if json_body else await request.post()
        result: Any = True
        if method == "getMe":
            result = {
                "id": BOT_ID,
                "is_bot": True,
                "first_name": "Consultant",
                "username": "smoke_bot",
                "can_join_groups": True,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False,
            }
        elif method == "getUpdates":
            result = await self._get_updates(form)
        elif method in ("sendMessage", "sendDocument", "editMessageText"):
            result = self._sent(method, form)
        return web.json_response({"ok": True, "result": result})

    async def _get_updates(self, form: Any) -> list[dict[str, Any]]:
        offset = int(form.get("offset") or 0)
        self.updates = [u for u in self.updates if u["update_id"] >= offset]
        if not self.updates:
            self._arrived.clear()
            wait = min(float(form.get("timeout") or 0), 1.0)
            try:
                await asyncio.wait_for(self._arrived.wait(), wait)
            except TimeoutError:
                return []
        return self.updates[:100]

    def _sent(self, method: str, form: Any) -> dict[str, Any]:
        chat_id = int(form["chat_id"])
        sent = Sent(method, chat_id, text=str(form.get("text") or form.get("caption") or ""))
        document = form.get("document")
        if isinstance(document, web.FileField):
            sent.filename = document.filename
            sent.data = document.file.read()
        self.sent.append(sent)
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private", "first_name": "Smoke"},
            "from": {"id": BOT_ID, "is_bot": True, "first_name": "Consultant"},
        }
        if sent.filename:
            message["document"] = {
                "file_id": f"doc-{message['message_id']}",
                "file_unique_id": f"u{message['message_id']}",
                "file_name": sent.filename,
            }
        else:
            message["text"] = sent.text
        return message

    def texts_to(self, chat_id: int) -> list[str]:
        return [s.text for s in self.sent if s.chat_id == chat_id and not s.filename]

    def documents_to(self, chat_id: int) -> list[Sent]:
        return [s for s in self.sent if s.chat_id == chat_id and s.filename]


async def _serve_model(port: int) -> None:
    model = FakeModel(port)
    await model.served.start()
    print(f"fake model at {model.base_url}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    """`python smoke_fakes.py --port N`: the fake model alone, until killed (the image's
    smoke check starts `consultation-bot api` against it)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, required=True)
    asyncio.run(_serve_model(parser.parse_args().port))


if __name__ == "__main__":
    main()
