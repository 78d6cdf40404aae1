"""The Telegram webhook: updates Telegram pushes to us, handed to the PTB Application.

Invariants:
- A body that is not a Telegram update (not JSON, not an object, nested deeper than the
  parsers recurse, a string with a lone surrogate) is answered 400 with a log line, never 500.
- Nothing reaches the application unless the request carries the secret token
  we registered with `setWebhook` (compared in constant time, as bytes, so a
  header that is not valid UTF-8 is simply a wrong secret: 403).
- An update with the secret that could never be handled (an `update_id` that is not a
  64-bit integer, a message without a chat, a text or button data that is not a string)
  is answered 200 and dropped, with a log
  line: refused, Telegram would send it again forever.
- Each `update_id` is queued at most once: Telegram redelivers an update when
  it did not see our 200 in time, and a redelivery is answered 200 and dropped.
  The ids are recorded in the store (`remember_update`), so this holds across
  restarts too. An update whose id cannot be recorded (store unavailable) is
  answered 503 and not queued: Telegram delivers it again later.
- An accepted update is queued and answered 200 at once, so Telegram never
  waits on the model. Per-chat ordering is the application's job, not this route's.

The id is recorded just before the update is queued: a process that dies in
between loses that one update (Telegram will not resend it), which is the price
of never answering the same message twice.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web
from telegram import Update
from telegram.ext import Application

from api.errors import ApiError, store_unavailable
from core.domain.errors import StoreUnavailable

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
TELEGRAM_MAX_WEBHOOK_CONNECTIONS = 100  # setWebhook accepts 1–100

TelegramApp = Application[Any, Any, Any, Any, Any, Any]

UpdateSink = Callable[[dict[str, Any], Update], Awaitable[bool]]
"""Takes an update's JSON object (and the update parsed from it) and commits it for
handling; False for a redelivery."""


_ID = range(-(2**63), 2**63)  # what the stores' 64-bit integer columns hold
_MESSAGES = (
    "message",
    "edited_message",
    "channel_post",
    "edited_channel_post",
    "business_message",
    "edited_business_message",
)


def unhandleable(data: dict[str, Any]) -> str | None:
    """Why an update object (with the right secret) could never be stored or handled, or
    None: an `update_id` that is not a 64-bit non-negative integer, a message without a
    chat (or with a chat id no column holds), a field the bot reads (text, caption, topic,
    sender id, button data) of another type than Telegram sends."""
    update_id = data.get("update_id")
    if type(update_id) is not int or not 0 <= update_id < 2**63:
        return "update_id is not a 64-bit non-negative integer"
    for field in _MESSAGES:
        if field not in data:
            continue
        message = data[field]
        chat = message.get("chat") if isinstance(message, dict) else None
        chat_id = chat.get("id") if isinstance(chat, dict) else None
        if type(chat_id) is not int or chat_id not in _ID:
            return f"{field} without a chat"
        wrong = _mistyped(message) or _mistyped(message.get("reply_to_message"))
        if wrong is not None:
            return f"{field}.{wrong} of the wrong type"
    query = data.get("callback_query")
    if isinstance(query, dict):
        wrong = _mistyped(query, _QUERY_FIELDS)
        if wrong is not None:
            return f"callback_query.{wrong} of the wrong type"
    return None


# Fields the bot reads, which the Bot API parser takes as they come: a forged update with
# another JSON type there would fail deep in a handler (or in the store) instead.
_MESSAGE_FIELDS: dict[str, type] = {"text": str, "caption": str, "message_thread_id": int}
_QUERY_FIELDS: dict[str, type] = {"data": str}


def _mistyped(obj: object, fields: dict[str, type] = _MESSAGE_FIELDS) -> str | None:
    """The first field of `obj` (a message or callback query object) the bot reads whose
    value is not of the JSON type Telegram sends, or None (also for a non-object)."""
    if not isinstance(obj, dict):
        return None
    for name, kind in fields.items():
        value = obj.get(name)
        if value is not None and (type(value) is not kind or (kind is int and value not in _ID)):
            return name
    sender = obj.get("from")
    if sender is not None:
        sender_id = sender.get("id") if isinstance(sender, dict) else None
        if type(sender_id) is not int or sender_id not in _ID:
            return "from"
    return None


def _loads(raw: bytes) -> Any:
    """The JSON value of `raw`; raises ValueError for a string holding a lone surrogate
    (`\\ud800`): valid JSON, but no Unicode text, so no store could keep it."""
    data = json.loads(raw)
    if b"\\u" in raw:  # only an escape can make a surrogate
        json.dumps(data, ensure_ascii=False).encode()  # UnicodeEncodeError is a ValueError
    return data


class UpdateLog(Protocol):
    """Where accepted update ids are remembered (either store is one)."""

    async def remember_update(self, update_id: int, *, bot: int = 0) -> bool:
        """Record the bot's `update_id`; True the first time it is seen."""
        ...


class TelegramWebhook:
    def __init__(
        self,
        application: TelegramApp,
        secret: str,
        *,
        seen: UpdateLog | None = None,
        sink: UpdateSink | None = None,
        scope: int = 0,
    ) -> None:
        """`scope` is the bot the updates come to: its update ids are remembered under it."""
        self._scope = scope
        if not secret:
            raise ValueError("a webhook needs a secret token (WEBHOOK_SECRET)")
        self._application = application
        self._secret = secret.encode()
        self._seen = seen
        self._sink = sink

    async def handle(self, request: web.Request) -> web.Response:
        """Check the secret, drop a redelivery, queue the update, answer 200 at once."""
        given = request.headers.get(SECRET_HEADER)
        if given is None:
            raise ApiError("UNAUTHORIZED", "missing secret token")
        # aiohttp keeps undecodable header bytes as surrogate escapes: turn them back.
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), self._secret):
            raise ApiError("FORBIDDEN", "wrong secret token")
        try:
            data = _loads(await request.read())
            if not isinstance(data, dict):
                raise TypeError(f"a JSON {type(data).__name__}, not an object")
            update = Update.de_json(data, self._application.bot)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            # RecursionError: JSON nested deeper than the parser (or PTB's) recurses.
            log.warning("webhook: not an update (%s)", exc)
            raise ApiError("VALIDATION_ERROR", "the body is not a Telegram update") from None
        problem = unhandleable(data)
        if problem is not None:  # refusing it would make Telegram resend it forever
            log.warning("webhook: not an update we can handle (%s); dropped", problem)
            return web.json_response({"ok": True})
        if self._sink is not None:
            return await self._to_sink(self._sink, data, update)
        if self._seen is not None:
            try:
                first = await self._seen.remember_update(update.update_id, bot=self._scope)
            except StoreUnavailable as exc:
                log.warning("webhook: update %d refused for now: %s", update.update_id, exc)
                raise store_unavailable() from None
            if not first:
                log.info("webhook: update %d was already received; dropped", update.update_id)
                return web.json_response({"ok": True})
        await self._application.update_queue.put(update)
        return web.json_response({"ok": True})

    async def _to_sink(
        self, sink: UpdateSink, data: dict[str, Any], update: Update
    ) -> web.Response:
        update_id = update.update_id
        try:
            new = await sink(data, update)
        except StoreUnavailable as exc:
            log.warning("webhook: update %d refused for now: %s", update_id, exc)
            raise store_unavailable() from None
        if not new:
            log.info("webhook: update %d was already received; dropped", update_id)
        return web.json_response({"ok": True})

    async def register(self, url: str, *, max_connections: int) -> None:
        """Tell Telegram where to send updates (and the secret to send with them).

        Telegram opens up to `max_connections` at once (its default, 40, is above the
        server's 32 per address): at most the server's per-address limit, so its
        deliveries are never refused as one address's flood."""
        await self._application.bot.set_webhook(
            url,
            secret_token=self._secret.decode(),
            allowed_updates=Update.ALL_TYPES,
            max_connections=min(max_connections, TELEGRAM_MAX_WEBHOOK_CONNECTIONS),
        )
        log.info("webhook set to %s", url)
