"""Which bot an API request is for: the deployment's own (scope 0) or a stored bot.

Invariants:
- a request names its bot by `bot`: the JSON field of `POST /api/chat` (and its stream),
  `metadata.bot` of `/v1/chat/completions`, `?bot=` on the session and memory routes; a
  stored bot's id or its `@username`. Absent (or 0): the deployment's own bot, under the
  keys stored before the API named bots (`core.domain.api_keys`);
- a reference is read strictly (`parse_bot`): a JSON integer or digits without leading
  zeros up to `MAX_SCOPE`, or `@` and 1–64 of `[A-Za-z0-9_]`; anything else is
  VALIDATION_ERROR before anything is read;
- a bot not stored, removed or disabled is BOT_NOT_FOUND (404) before anything is read or
  stored (`served`);
- a request whose bearer is a bot's own API token (`bots set BOT api_token=-`; the gate in
  `api.app` looks it up by its SHA-256, `pinned`) is pinned to that bot (`PINNED_KEY`): it
  runs on that bot without naming it, and naming another bot — or one that does not
  exist — is FORBIDDEN (403); its `GET /api/stats` is that bot's figures only;
- the turn then runs on that bot's engine (its role or instruction, rounds, model and
  limits) and under its scope's keys, so two bots never share a session, a user's memory,
  a quota or an idempotency key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from api.errors import ApiError
from api.schemas import BOT_REF_PATTERN
from core.domain.telegram_keys import DEFAULT_SCOPE, MAX_SCOPE
from core.turns.engine import Engine

_REF = re.compile(BOT_REF_PATTERN)

BotRef = int | str
"""A bot as a request names it: its scope (0: the deployment's own), or its username
(without `@`, as typed; usernames compare case-insensitively)."""


@dataclass(frozen=True, slots=True)
class ServedBot:
    """The bot a request runs on: its scope (keys) and its engine (defaults)."""

    scope: int
    engine: Engine


PINNED_KEY = web.RequestKey("pinned_bot", int)
"""The bot a request's bearer token is (set by the gate in `api.app`); absent: any bot."""


class BotEngines(Protocol):
    """The bots the API serves (the composition root's `app.api_bots.ApiBots`)."""

    async def served(self, ref: BotRef) -> ServedBot | None:
        """The enabled bot `ref` names with its engine; None when none does."""
        ...

    async def pinned(self, token_digest: str) -> int | None:
        """The enabled bot whose API token has this SHA-256 (hex); None for none."""
        ...


class OwnBotOnly:
    """The deployment's own bot alone: a deployment (or a test) without stored bots."""

    def __init__(self, engine: Engine) -> None:
        self._own = ServedBot(DEFAULT_SCOPE, engine)

    async def served(self, ref: BotRef) -> ServedBot | None:
        return self._own if ref == DEFAULT_SCOPE else None

    async def pinned(self, token_digest: str) -> int | None:
        return None


def parse_bot(value: object, where: str = "bot") -> BotRef | None:
    """The bot `value` names (None: none named); VALIDATION_ERROR naming `where` for
    anything else."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SCOPE:
        return value
    if isinstance(value, str) and _REF.fullmatch(value):
        if value.startswith("@"):
            return value[1:]
        if int(value) <= MAX_SCOPE:
            return int(value)
    raise ApiError(
        "VALIDATION_ERROR",
        f"{where}: a bot's id (0: this deployment's own bot) or its @username",
    )


def query_bot(request: web.Request) -> BotRef | None:
    """`?bot=`, given at most once (absent: None)."""
    given = request.query.getall("bot", [])
    if len(given) > 1:
        raise ApiError("VALIDATION_ERROR", "bot: given once")
    return parse_bot(given[0] if given else None)


async def served(bots: BotEngines, request: web.Request, ref: BotRef | None) -> ServedBot:
    """The bot `ref` names for `request` (None: its token's bot, else the deployment's
    own); BOT_NOT_FOUND, or FORBIDDEN for a request pinned to another bot."""
    pinned = request.get(PINNED_KEY)
    if ref is None:
        ref = DEFAULT_SCOPE if pinned is None else pinned
    found = await bots.served(ref)
    if pinned is not None and (found is None or found.scope != pinned):
        raise forbidden(pinned)
    if found is None:
        raise not_found()
    return found


def forbidden(pinned: int) -> ApiError:
    return ApiError(
        "FORBIDDEN", f"this API token is bot {pinned}'s: it reaches no other bot (omit `bot`)"
    )


def not_found() -> ApiError:
    return ApiError(
        "BOT_NOT_FOUND",
        "no such bot: name an enabled bot by its id or @username (`consultation-bot bots list`)",
    )
