"""The Telegram webhook: updates Telegram pushes to us, handed to the PTB Application.

Invariant: nothing reaches the application unless the request carries the secret
token we registered with `setWebhook` (compared in constant time); an accepted
update is queued and answered 200 at once, so Telegram never waits on the model.
Per-chat ordering is the application's update processor's job, not this route's.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

from aiohttp import web
from telegram import Update
from telegram.ext import Application

from api.errors import ApiError

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

TelegramApp = Application[Any, Any, Any, Any, Any, Any]


class TelegramWebhook:
    def __init__(self, application: TelegramApp, secret: str) -> None:
        if not secret:
            raise ValueError("a webhook needs a secret token (WEBHOOK_SECRET)")
        self._application = application
        self._secret = secret.encode()

    async def handle(self, request: web.Request) -> web.Response:
        """Check the secret, queue the update, answer 200 without waiting for it."""
        given = request.headers.get(SECRET_HEADER)
        if given is None:
            raise ApiError("UNAUTHORIZED", "missing secret token")
        if not hmac.compare_digest(given.encode(), self._secret):
            raise ApiError("FORBIDDEN", "wrong secret token")
        try:
            data = json.loads(await request.read())
            update = Update.de_json(data, self._application.bot)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("webhook: not an update (%s)", exc)
            raise ApiError("VALIDATION_ERROR", "the body is not a Telegram update") from None
        await self._application.update_queue.put(update)
        return web.json_response({"ok": True})

    async def register(self, url: str) -> None:
        """Tell Telegram where to send updates (and the secret to send with them)."""
        await self._application.bot.set_webhook(
            url, secret_token=self._secret.decode(), allowed_updates=Update.ALL_TYPES
        )
        log.info("webhook set to %s", url)
