"""`GET /api/users/{userId}/memory`, `DELETE /api/users/{userId}/memory/{factId}` and
`DELETE /api/users/{userId}/memory`: what the deployment remembers about an API user, and
deleting one fact or all of it (facts and the user's memory preferences).

Invariants: a user id is read strictly (1–64 characters of `[A-Za-z0-9_.:@-]`, else
VALIDATION_ERROR) and names the owner `api:<userId>` only (`api<n>:<userId>` with `?bot=n`,
`api.bots`), so no path reaches a Telegram person's facts, nor another bot's user's; a
fact is deleted only if it is that user's (another user's id, an unknown or malformed one
is FACT_NOT_FOUND and changes nothing); reading never changes anything.
"""

from __future__ import annotations

from aiohttp import web

from api.bots import BotEngines, query_bot, served
from api.errors import ApiError, json_response
from api.schemas import MAX_USER_ID_CHARS, USER_ID, MemoryView
from core.domain.api_keys import person_key
from core.domain.facts import MAX_FACT_ID, MemoryScope, memory_scope
from core.domain.telegram_keys import DEFAULT_SCOPE
from core.turns.memories import Memories


def api_scope(user_id: str, bot: int = DEFAULT_SCOPE) -> MemoryScope:
    """The memory scope of an API user (`userId` as the request names it) of the bot of
    scope `bot`."""
    return memory_scope(person_key(user_id, bot))


class MemoryEndpoints:
    """Reading and deleting an API user's facts, of the bot `?bot=` names."""

    def __init__(self, bots: BotEngines) -> None:
        self._bots = bots

    async def _of(self, request: web.Request) -> tuple[Memories, MemoryScope]:
        """The memory of the request's bot and the scope of its user (`userId`)."""
        user_id = _user_id(request)
        bot = await served(self._bots, request, query_bot(request))
        return bot.engine.memories, api_scope(user_id, bot.scope)

    async def facts(self, request: web.Request) -> web.Response:
        """The user's facts, newest first (none for a user never seen)."""
        user_id = _user_id(request)
        memory, scope = await self._of(request)
        state = await memory.state(scope)
        view = MemoryView.of(user_id, state.facts)
        return json_response(view.model_dump(mode="json", by_alias=True))

    async def delete(self, request: web.Request) -> web.Response:
        """Delete one of the user's facts: 204, or FACT_NOT_FOUND."""
        memory, scope = await self._of(request)
        raw = request.match_info["fact_id"]
        fact_id = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 19 else 0
        if not 0 < fact_id <= MAX_FACT_ID or not await memory.forget_fact(scope, fact_id):
            raise ApiError("FACT_NOT_FOUND", "fact not found")
        return web.Response(status=204)

    async def forget(self, request: web.Request) -> web.Response:
        """Delete all the user's facts and preferences: 204, also for a user never seen
        (nothing is kept about them either way)."""
        memory, scope = await self._of(request)
        await memory.forget(scope.person)
        return web.Response(status=204)


def _user_id(request: web.Request) -> str:
    user_id = request.match_info["user_id"]
    if not USER_ID.fullmatch(user_id) or len(user_id) > MAX_USER_ID_CHARS:
        raise ApiError("VALIDATION_ERROR", "userId: 1 to 64 of A-Z a-z 0-9 _ . : @ -")
    return user_id
