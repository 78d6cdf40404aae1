"""`DELETE /api/sessions/{id}`: forget an API session — its messages, its idempotency keys
and anything kept with it — for a client that was asked to delete what it sent.

Invariant: the deletion is the store's one transaction (`core.turns.lifecycle.Lifecycle.forget`),
so a session is either whole or gone; a round being answered is stopped first and
stores nothing after it. An id that names no API session of the bot `?bot=` names
(`api.bots`) is 404, whatever it names.
"""

from __future__ import annotations

import uuid

from aiohttp import web

from api.bots import BotEngines, query_bot, served
from api.errors import ApiError
from core.domain.errors import ConsultationError


class ForgetEndpoint:
    def __init__(self, bots: BotEngines) -> None:
        self._bots = bots

    async def delete_session(self, request: web.Request) -> web.Response:
        """204 once the session is gone; 404 SESSION_NOT_FOUND otherwise."""
        bot = await served(self._bots, request, query_bot(request))
        try:
            session_id = str(uuid.UUID(request.match_info["session_id"]))
            await bot.engine.lifecycle.forget_session(session_id)
        except (ValueError, ConsultationError):
            raise ApiError("SESSION_NOT_FOUND", "session not found") from None
        return web.Response(status=204)
