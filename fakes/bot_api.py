"""A fake Telegram Bot API server on 127.0.0.1 for end-to-end tests of the real PTB Application.

Invariant: every request is recorded in `calls` (with wall and monotonic timestamps) before it
is answered, and it is answered the way Telegram would: HTTP 200 `{"ok": true, ...}` on success,
a real HTTP error status with `{"ok": false, ...}` otherwise (PTB needs the status). Messages are
validated like Telegram does (empty, too long, entities outside the text, "not modified").

Several bots: `tokens` maps each token the server knows to its bot's (id, username); getMe
answers for the token asked with, and any other token gets 401 Unauthorized as from Telegram.
Without `tokens` every token is the one bot (`bot_id`, `username`).

Payments in Stars (`fakes.bot_payments`): sendInvoice, createInvoiceLink,
answerPreCheckoutQuery, refundStarPayment and editUserStarSubscription, with the
`pre_checkout_query` and `successful_payment` update builders (`fakes.bot_updates`).

Each bot has its own queue of updates (`push_update(..., token=)`,
`POST /_control/updates?token=`) and each call records its token (`Call.token`; `GET
/_control/calls?token=` lists one bot's).

Standalone, for the benchmark: ``python -m fakes.bot_api --port N``; push updates with
``POST /_control/updates`` (a JSON list of Update objects or of `text_message` keyword dicts)
and read what the bot sent with ``GET /_control/calls?since=I&method=sendMessage``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from fakes.bot_api_checks import check_text
from fakes.bot_files import BotFiles, StoredFile
from fakes.bot_payments import PAYMENT_METHODS, BotPayments
from fakes.bot_updates import UpdateBuilder
from fakes.serving import LOOPBACK, LocalServer, until_stopped

TOKEN = "123456:TEST-TOKEN"
MAX_CAPTION = 1024
STREAM_CHUNK = 16 * 1024
"""Bytes per chunk of a file served without a Content-Length."""
STRING_PARAMS = frozenset(
    {
        "text",
        "caption",
        "parse_mode",
        "action",
        "url",
        "secret_token",
        "callback_query_id",
        "language_code",
        "description",
        "short_description",
        "name",
        "emoji",
        "query",
        "chat_id",
        # payments (`fakes.bot_payments`): texts that may look like JSON numbers
        "title",
        "payload",
        "currency",
        "provider_token",
        "error_message",
        "pre_checkout_query_id",
        "telegram_payment_charge_id",
    }
)
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)


@dataclass(frozen=True, slots=True)
class Upload:
    """A file the bot uploaded (multipart), with its bytes."""

    filename: str
    content_type: str
    data: bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "filename": self.filename,
            "content_type": self.content_type,
            "size": len(self.data),
        }


@dataclass(slots=True)
class Call:
    """One request the bot made, with JSON-decoded parameters."""

    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.time)
    monotonic: float = field(default_factory=time.monotonic)
    status: int = 200
    result: Any = None
    token: str = ""  # the token in the request's path: which bot made it

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "params": {
                k: v.to_dict() if isinstance(v, Upload) else v for k, v in self.params.items()
            },
            "at": self.at,
            "monotonic": self.monotonic,
            "status": self.status,
            "token": self.token,
        }


@dataclass(slots=True)
class _Failure:
    status: int
    description: str
    retry_after: int | None
    times: int
    token: str | None = None  # only the calls of this bot's token (None: any)


def _decode(key: str, value: Any) -> Any:
    """PTB sends strings raw and everything else JSON-encoded; undo that."""
    if isinstance(value, web.FileField):
        return Upload(value.filename, value.content_type, value.file.read())
    if not isinstance(value, str):
        return value
    if key in STRING_PARAMS:
        with contextlib.suppress(ValueError):
            if key == "chat_id":
                return int(value)
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


class FakeBotApi(UpdateBuilder, BotFiles, BotPayments):
    """Records every Bot API call and answers like Telegram; `push_update` feeds getUpdates.

    File downloads are recorded as calls of the method "download" (`file_path` param).
    """

    def __init__(
        self,
        *,
        port: int = 0,
        username: str = "consult_bot",
        can_read_all_group_messages: bool = False,
        poll_cap: float = 0.5,
        tokens: Mapping[str, tuple[int, str]] | None = None,
    ) -> None:
        UpdateBuilder.__init__(self)
        BotFiles.__init__(self)
        BotPayments.__init__(self)
        self.host, self.port = LOOPBACK, port
        self.username = username
        self.can_read_all_group_messages = can_read_all_group_messages
        self.poll_cap = poll_cap  # longest getUpdates wait, whatever `timeout` the bot asks for
        self.bot_id = 123456
        self.tokens = None if tokens is None else dict(tokens)
        """Token → (bot id, username) of every bot served; None: any token is the one bot."""
        self.calls: list[Call] = []
        self.latency: dict[str, float] = {}
        self.member_status: dict[int, str] = {}  # user id → "creator"/"administrator"/"member"
        self.commands: dict[str, Any] = {}
        self.pushed_at: dict[int, float] = {}  # update_id → time.monotonic() when queued
        self._queues: dict[str, list[dict[str, Any]]] = {}
        """Updates waiting for getUpdates, per token ("": the one bot without `tokens`)."""
        self._failures: dict[str, list[_Failure]] = {}
        self._changed = asyncio.Event()  # replaced by a fresh one after each change
        self._closing = asyncio.Event()
        self._server: LocalServer | None = None

    @property
    def base_url(self) -> str:
        """PTB's `base_url`: the token is appended to it."""
        return f"http://{self.host}:{self.port}/bot"

    @property
    def file_base_url(self) -> str:
        """PTB's `base_file_url`: the token, then the file path, are appended to it."""
        return f"http://{self.host}:{self.port}/file/bot"

    def build_app(self) -> web.Application:
        """The Bot API routes and the control endpoints (a subclass may add routes)."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/bot{token}/{method}", self._handle)
        app.router.add_get("/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        app.router.add_post("/_control/updates", self._control_updates)
        app.router.add_get("/_control/calls", self._control_calls)
        app.router.add_post("/_control/fail", self._control_fail)
        return app

    async def start(self) -> None:
        self._server = LocalServer(self.build_app(), port=self.port)
        await self._server.start()
        self.port = self._server.port

    async def stop(self) -> None:
        self._closing.set()
        self._notify()
        if self._server is not None:
            await self._server.stop()

    # -- test helpers ------------------------------------------------------------------------

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def sent_texts(self, chat_id: int | str) -> list[str]:
        """Texts of successful sendMessage/editMessageText calls to the chat, in order."""
        return [
            c.params["text"]
            for c in self.calls
            if c.status == 200
            and c.method in ("sendMessage", "editMessageText")
            and c.params.get("chat_id") == chat_id
        ]

    def fail_next(
        self,
        method: str,
        *,
        status: int,
        description: str,
        retry_after: int | None = None,
        times: int = 1,
        token: str | None = None,
    ) -> None:
        """Make the next `times` calls of `method` fail (429 + retry_after, 403, 400, 502...);
        with `token`, only that bot's calls (the others' are answered as usual)."""
        self._failures.setdefault(method, []).append(
            _Failure(status, description, retry_after, times, token)
        )

    async def wait_for(
        self,
        match: str | Callable[[Call], bool],
        timeout: float = 5.0,  # noqa: ASYNC109 - the one-argument form tests read best
        *,
        count: int = 1,
    ) -> Call:
        """Wait until `count` calls (so far, in total) match a method name or predicate."""
        pred = (lambda c: c.method == match) if isinstance(match, str) else match
        found: list[Call] = []

        def enough() -> bool:
            found[:] = [c for c in self.calls if pred(c)]
            return len(found) >= count

        if not await self._until(enough, timeout):
            seen = [(c.method, c.params.get("text")) for c in self.calls]
            raise TimeoutError(f"no {count} call(s) matching {match!r}; got {seen}")
        return found[count - 1]

    async def _until(self, pred: Callable[[], bool], seconds: float) -> bool:
        """Wait until `pred()` holds after some change, up to `seconds`."""
        deadline = asyncio.get_running_loop().time() + seconds
        while not pred():
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0 or self._closing.is_set():
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)
        return True

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # -- updates -----------------------------------------------------------------------------

    def push_update(self, update: dict[str, Any], *, token: str | None = None) -> dict[str, Any]:
        """Queue an update for getUpdates (an `update_id` is assigned when missing): for the
        bot of `token` when the server serves several (`tokens`; then a token is needed)."""
        queue = self._queue(token or "")
        if "update_id" not in update:
            update["update_id"] = self.next_update_id()
        for key in ("message", "edited_message"):
            if key in update:
                msg = update[key]
                self.messages[(msg["chat"]["id"], msg["message_id"])] = msg
                paid = msg.get("successful_payment")
                if isinstance(paid, dict):  # the charge is the bot's it was paid to
                    self.charge_bots[str(paid.get("telegram_payment_charge_id"))] = token or ""
        queue.append(update)
        self.pushed_at[update["update_id"]] = time.monotonic()
        self._notify()
        return update

    # -- the Bot API -------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        token = request.match_info["token"]
        params = {k: _decode(k, v) for k, v in (await _fields(request)).items()}
        call = Call(method, params, token=token)
        self.calls.append(call)
        if self.tokens is not None and token not in self.tokens:
            call.status = 401
            self._notify()
            status, body = _error(401, "Unauthorized")
            return web.json_response(body, status=status)
        if delay := self.latency.get(method, 0.0):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), delay)
        status, body = self._injected(method, token) or await self._answer(method, params, token)
        call.status, call.result = status, body.get("result")
        self._notify()
        return web.json_response(body, status=status)

    async def _download(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        call = Call("download", {"file_path": path})
        self.calls.append(call)
        status, body = self._injected("download") or (200, {})
        stored = self.by_path.get(path)
        if status == 200 and stored is None:
            status, body = _error(404, "Not Found")
        call.status = status
        self._notify()
        if status != 200 or stored is None:
            return web.json_response(body, status=status)
        if stored.size is None:
            return await self._stream(request, stored)
        return web.Response(body=stored.data, content_type="application/octet-stream")

    async def _stream(self, request: web.Request, stored: StoredFile) -> web.StreamResponse:
        """The bytes in chunks without a Content-Length, counted in `sent`; each chunk waits
        for the previous one to be taken (and lets the client run), and a client that hung
        up ends it."""
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        self.sent[stored.path] = 0
        for start in range(0, len(stored.data), STREAM_CHUNK):
            if request.transport is None or request.transport.is_closing():
                return response
            chunk = stored.data[start : start + STREAM_CHUNK]
            try:
                await response.write(chunk)
            except ConnectionError:
                return response
            self.sent[stored.path] += len(chunk)
            await asyncio.sleep(0)
        await response.write_eof()
        return response

    def _injected(self, method: str, token: str = "") -> tuple[int, dict[str, Any]] | None:
        queue = self._failures.get(method)
        failure = next((f for f in queue or () if f.token in (None, token)), None)
        if failure is None or queue is None:
            return None
        failure.times -= 1
        if failure.times <= 0:
            queue.remove(failure)
        extra = {"parameters": {"retry_after": failure.retry_after}} if failure.retry_after else {}
        return _error(failure.status, failure.description, **extra)

    async def _answer(
        self, method: str, p: dict[str, Any], token: str = ""
    ) -> tuple[int, dict[str, Any]]:
        if method == "getMe":
            bot_id, username = (self.tokens or {}).get(token, (self.bot_id, self.username))
            return _ok(
                {
                    "id": bot_id,
                    "is_bot": True,
                    "first_name": "Consultant",
                    "username": username,
                    "can_join_groups": True,
                    "can_read_all_group_messages": self.can_read_all_group_messages,
                    "supports_inline_queries": False,
                }
            )
        if method == "getUpdates":
            return _ok(await self._get_updates(p, token))
        if method == "getFile":
            status, file = self.get_file(str(p.get("file_id")))
            return _ok(file) if status == 200 else _error(status, str(file))
        if method in ("sendMessage", "editMessageText", "sendMessageDraft"):
            problem = check_text(p.get("text"), p.get("entities"), p.get("parse_mode"))
            if problem:
                return _error(400, problem)
            if method == "sendMessageDraft":
                return _ok(True)
            return self._send(p) if method == "sendMessage" else self._edit(p)
        if method == "sendDocument":
            return self._send_document(p)
        if method in PAYMENT_METHODS:
            return self.payment_call(method, p, token if self.tokens is not None else "")
        if method == "editMessageReplyMarkup":
            msg = self.messages.get(_message_key(p))
            if msg is None:
                return _error(400, "Bad Request: message to edit not found")
            if p.get("reply_markup") == msg.get("reply_markup"):
                return _error(400, NOT_MODIFIED)
            msg["reply_markup"] = p.get("reply_markup") or None
            return _ok(_strip(msg))
        if method == "deleteMessage":
            if self.messages.pop(_message_key(p), None) is None:
                return _error(400, "Bad Request: message to delete not found")
            return _ok(True)
        if method in ("setMyCommands", "deleteMyCommands"):
            key = json.dumps([p.get("scope"), p.get("language_code")])
            if method == "setMyCommands":
                self.commands[key] = p.get("commands")
            else:  # the menus of wider scopes apply again
                self.commands.pop(key, None)
            return _ok(True)
        if method == "getChatMember":
            return _ok(self._member(int(p["user_id"])))
        if method == "getChat":
            chat = self.chat(p.get("chat_id"))
            return _ok(
                {
                    **chat,
                    "accent_color_id": 0,
                    "max_reaction_count": 11,
                    "accepted_gift_types": dict.fromkeys(
                        (
                            "unlimited_gifts",
                            "limited_gifts",
                            "unique_gifts",
                            "premium_subscription",
                            "gifts_from_channels",
                        ),
                        False,
                    ),
                }
            )
        if method == "getWebhookInfo":
            return _ok({"url": "", "has_custom_certificate": False, "pending_update_count": 0})
        if method in (
            "deleteWebhook",
            "setWebhook",
            "sendChatAction",
            "answerCallbackQuery",
            "close",
            "logOut",
            "setMyDescription",
            "setMyShortDescription",
        ):
            return _ok(True)
        return _error(404, "Not Found: method not found")

    def _queue(self, token: str) -> list[dict[str, Any]]:
        """The updates waiting for the bot of `token` (any token: the one bot's)."""
        if self.tokens is None:
            token = ""
        elif token not in self.tokens:
            raise ValueError("with several bots (`tokens`), name the bot's token")
        return self._queues.setdefault(token, [])

    async def _get_updates(self, p: dict[str, Any], token: str) -> list[dict[str, Any]]:
        queue = self._queue(token)
        offset = int(p.get("offset") or 0)
        if offset > 0:  # confirms every earlier update
            queue[:] = [u for u in queue if u["update_id"] >= offset]
        wait = min(float(p.get("timeout") or 0), self.poll_cap)
        await self._until(lambda: bool(queue), wait)
        return queue[: int(p.get("limit") or 100)]

    def _send(self, p: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        chat_id = p.get("chat_id")
        msg: dict[str, Any] = {
            "message_id": self.next_message_id(),
            "date": int(time.time()),
            "chat": self.chat(chat_id),
            "text": p["text"],
            "from": {
                "id": self.bot_id,
                "is_bot": True,
                "first_name": "Consultant",
                "username": self.username,
            },
        }
        for key in ("entities", "message_thread_id"):
            if p.get(key):
                msg[key] = p[key]
        # A message carries only an inline keyboard: Telegram keeps no ForceReply or reply
        # keyboard in the Message it returns (or quotes in a reply).
        if isinstance(p.get("reply_markup"), dict) and "inline_keyboard" in p["reply_markup"]:
            msg["reply_markup"] = p["reply_markup"]
        if msg.get("message_thread_id"):
            msg["is_topic_message"] = True
        reply = p.get("reply_parameters") or {}
        if "message_id" in reply and (chat_id, reply["message_id"]) in self.messages:
            msg["reply_to_message"] = _strip(self.messages[(chat_id, reply["message_id"])])
        self.messages[(chat_id, msg["message_id"])] = msg
        return _ok(msg)

    def _send_invoice_message(
        self, p: dict[str, Any], invoice: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        """sendInvoice: a message carrying the invoice (and its Pay button, if given)."""
        status, sent = self._send({**p, "text": ""})
        message = sent["result"]
        del message["text"]
        self.messages[(p.get("chat_id"), message["message_id"])].pop("text", None)
        message["invoice"] = invoice
        return status, sent

    def _send_document(self, p: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A document uploaded as multipart: its bytes stay in the call (`Upload`)."""
        upload = p.get("document")
        if not isinstance(upload, Upload):
            return _error(400, "Bad Request: there is no document in the request")
        if not upload.data:
            return _error(400, "Bad Request: file must be non-empty")
        if len(str(p.get("caption") or "")) > MAX_CAPTION:
            return _error(400, "Bad Request: message caption is too long")
        status, sent = self._send({**p, "text": ""})
        message = sent["result"]
        del message["text"]
        self.messages[(p.get("chat_id"), message["message_id"])].pop("text", None)
        message["document"] = {
            "file_id": f"doc-{message['message_id']}",
            "file_unique_id": f"udoc-{message['message_id']}",
            "file_name": upload.filename,
            "mime_type": upload.content_type,
            "file_size": len(upload.data),
        }
        if p.get("caption"):
            message["caption"] = p["caption"]
        return status, sent

    def _edit(self, p: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        msg = self.messages.get(_message_key(p))
        if msg is None:
            return _error(400, "Bad Request: message to edit not found")
        new = {
            "text": p["text"],
            "entities": p.get("entities") or None,
            "reply_markup": p.get("reply_markup") or None,
        }
        if all(msg.get(k) == v for k, v in new.items()):
            return _error(400, NOT_MODIFIED)
        msg.update(new, edit_date=int(time.time()))
        return _ok(_strip(msg))

    def _member(self, user_id: int) -> dict[str, Any]:
        status = self.member_status.get(user_id, "member")
        member: dict[str, Any] = {"status": status, "user": self.user(user_id)}
        if status == "creator":
            member["is_anonymous"] = False
        elif status == "administrator":
            member.update(
                dict.fromkeys(
                    (
                        "can_be_edited",
                        "is_anonymous",
                        "can_manage_video_chats",
                        "can_restrict_members",
                        "can_promote_members",
                        "can_post_stories",
                        "can_edit_stories",
                        "can_delete_stories",
                    ),
                    False,
                )
            )
            member.update(
                dict.fromkeys(
                    (
                        "can_manage_chat",
                        "can_delete_messages",
                        "can_change_info",
                        "can_invite_users",
                    ),
                    True,
                )
            )
        return member

    # -- control endpoints for the benchmark --------------------------------------------------

    async def _control_updates(self, request: web.Request) -> web.Response:
        items = await request.json()
        token = request.query.get("token")
        if self.tokens is not None and token not in self.tokens:
            return web.json_response({"error": "name a bot: ?token=…"}, status=400)
        pushed = []
        for item in items if isinstance(items, list) else [items]:
            if "update_id" not in item and "chat_id" in item:
                item = self.text_message(item.pop("chat_id"), item.pop("text"), **item)
            update = self.push_update(item, token=token)
            pushed.append(
                {"update_id": update["update_id"], "monotonic": self.pushed_at[update["update_id"]]}
            )
        return web.json_response(pushed)

    async def _control_calls(self, request: web.Request) -> web.Response:
        since = int(request.query.get("since", 0))
        method = request.query.get("method")
        token = request.query.get("token")
        rows = [
            c.to_dict()
            for c in self.calls[since:]
            if method in (None, c.method) and token in (None, c.token)
        ]
        return web.json_response({"next": len(self.calls), "calls": rows})

    async def _control_fail(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.fail_next(body.pop("method"), **body)
        return web.json_response({"ok": True})


def _ok(result: Any) -> tuple[int, dict[str, Any]]:
    return 200, {"ok": True, "result": result}


def _error(status: int, description: str, **extra: Any) -> tuple[int, dict[str, Any]]:
    return status, {"ok": False, "error_code": status, "description": description, **extra}


def _message_key(p: dict[str, Any]) -> tuple[Any, int]:
    """The (chat id, message id) a call names; message id -1, which no message has, if none."""
    message_id = p.get("message_id")
    return p.get("chat_id"), message_id if isinstance(message_id, int) else -1


def _strip(msg: dict[str, Any]) -> dict[str, Any]:
    """A message without None fields (Telegram omits absent fields)."""
    return {k: v for k, v in msg.items() if v is not None}


@pytest.fixture
async def bot_api() -> AsyncIterator[FakeBotApi]:
    """A started fake Bot API server, stopped after the test."""
    server = FakeBotApi()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def _serve(port: int, username: str) -> None:
    server = FakeBotApi(port=port, username=username)
    await server.start()
    print(f"fake Bot API on {server.base_url} (token any, e.g. {TOKEN})", flush=True)
    try:
        await until_stopped()
    finally:
        await server.stop()


async def _fields(request: web.Request) -> dict[str, Any]:
    """A call's parameters as the Bot API reads them: a form, multipart, or a JSON object
    (a JSON value that is not a string stands for its JSON text, as in a form)."""
    if not request.can_read_body:
        return {}
    if request.content_type == "application/json":
        try:
            body = await request.json()
        except ValueError:
            raise web.HTTPBadRequest(text="the body is not JSON") from None
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(text="a JSON body must be an object")
        return {k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()}
    return dict(await request.post())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8901)
    parser.add_argument("--username", default="consult_bot")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.port, args.username))


if __name__ == "__main__":
    main()
