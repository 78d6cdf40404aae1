"""`/admin/bots`: the bots the deployment serves besides TELEGRAM_BOT_TOKEN's — listed,
added after Telegram confirms the token, changed, disabled, enabled and removed.

Invariants:
- every change goes through the service the CLI uses (`admin.ports.BotKeeping`): checked
  the same way, refused in one line changing nothing;
- a token is never rendered: not in the list (only its last four characters), not in an
  answer to a refused add (its field comes back empty), not in the audit log;
- each change is written to the audit log with the bot's id and @username and what
  changed, right after it committed (a crash between the two leaves a change unlogged,
  never a logged change undone);
- removing needs the confirmation box ticked; a bot is named in a path by its id only;
- a bot's own API token is set as the CLI sets it (`BotKeeping.set_api_token`: its shape,
  not API_TOKEN, not another bot's), pasted or generated here (`secrets.token_hex`); a
  generated one is shown once, on the answer to the press that made it (never stored, and
  every console answer is no-store), a pasted one never; the audit log says set,
  generated or removed — never the token nor its digest. Taking one away needs the
  confirmation box ticked.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping

from aiohttp import web

from admin.auth import SESSION_KEY, read_form
from admin.config import PREFIX
from admin.ports import AdminStore, BotKeeping
from admin.render import bad_request, not_found, page
from core.domain.audit import AuditEntry
from core.domain.bots import (
    SETTABLE,
    BotProfile,
    BotRefused,
    ProfileInvalid,
    StoredBot,
    changed_profile,
)

MAX_ID_DIGITS = 18
LIMITS = (
    ("daily_tokens", "Tokens a day per person"),
    ("monthly_tokens", "Tokens a month per person"),
    ("daily_consultations", "Consultations a day per person"),
    ("messages_per_minute", "Messages a minute per person"),
)
"""The limits the forms offer (`core.domain.bots.LIMIT_KEYS`), with their labels."""
NO_SUCH_BOT = "No such bot."
GENERATED_BYTES = 32
"""A generated API token's randomness: 32 bytes, 64 hex digits (as `openssl rand -hex 32`)."""


class BotPages:
    def __init__(self, store: AdminStore, keeper: BotKeeping, clock: Callable[[], float]) -> None:
        self._store = store  # the audit log
        self._keeper = keeper
        self._clock = clock

    async def show(self, request: web.Request) -> web.StreamResponse:
        return await self._page(request)

    async def add(self, request: web.Request) -> web.StreamResponse:
        form = await read_form(request)
        entered = {key: form.get(key, "").strip() for key in SETTABLE}  # the token: never
        settings = {key: value for key, value in entered.items() if key != "label"}
        try:
            profile = changed_profile(BotProfile(), settings)
            bot = await self._keeper.add(form.get("token", ""), profile, label=entered["label"])
        except (BotRefused, ProfileInvalid) as refused:
            return await self._page(request, status=400, error=str(refused), entered=entered)
        await self._audit(request, "bot_add", bot, f"added {_summary(bot)}")
        raise web.HTTPSeeOther(f"{PREFIX}/bots")

    async def change(self, request: web.Request) -> web.StreamResponse:
        bot = await self._bot(request)
        if bot is None:
            return not_found(request, NO_SUCH_BOT)
        form = await read_form(request)
        changes = {key: form.get(key, "").strip() for key in SETTABLE}
        try:
            changed = await self._keeper.change(str(bot.id), changes)
        except (BotRefused, ProfileInvalid) as refused:
            return bad_request(request, f"{bot.handle}: {refused}. Nothing was changed.")
        await self._audit(request, "bot_set", changed, f"settings {_summary(changed)}")
        raise web.HTTPSeeOther(f"{PREFIX}/bots")

    async def enable(self, request: web.Request) -> web.StreamResponse:
        return await self._switch(request, enabled=True)

    async def disable(self, request: web.Request) -> web.StreamResponse:
        return await self._switch(request, enabled=False)

    async def remove(self, request: web.Request) -> web.StreamResponse:
        form = await read_form(request)
        if form.get("confirm") != "yes":
            return bad_request(request, "Removing needs the confirmation box ticked.")
        bot = await self._bot(request)
        if bot is None:
            return not_found(request, NO_SUCH_BOT)
        try:
            removed = await self._keeper.remove(str(bot.id))
        except BotRefused:
            return not_found(request, NO_SUCH_BOT)  # removed meanwhile
        detail = "removed; what it stored is kept"
        if form.get("data") == "delete":
            try:
                gone = await self._keeper.forget_data(removed)
            except BotRefused:  # added again meanwhile: its data is its own again
                gone = None
            if gone is not None:
                plural = "s" * (gone != 1)
                detail = f"removed; what it stored is deleted ({gone} consultation{plural})"
        await self._audit(request, "bot_remove", removed, detail)
        raise web.HTTPSeeOther(f"{PREFIX}/bots")

    async def set_api_token(self, request: web.Request) -> web.StreamResponse:
        """Set the bot's own API token: the one pasted, or with `generate` a new one,
        shown once on the page this answers with."""
        bot = await self._bot(request)
        if bot is None:
            return not_found(request, NO_SUCH_BOT)
        form = await read_form(request)
        generate = form.get("generate") == "yes"
        token = secrets.token_hex(GENERATED_BYTES) if generate else form.get("api_token", "")
        if not token.strip():
            return bad_request(request, f"{bot.handle}: paste a token or press Generate.")
        try:
            changed = await self._keeper.set_api_token(str(bot.id), token)
        except BotRefused as refused:
            return bad_request(request, f"{bot.handle}: {refused}")
        detail = "API token generated" if generate else "API token set"
        await self._audit(request, "bot_api_token", changed, detail)
        if generate:
            return await self._page(request, generated=(changed, token))
        raise web.HTTPSeeOther(f"{PREFIX}/bots")

    async def remove_api_token(self, request: web.Request) -> web.StreamResponse:
        """Take the bot's own API token away (its requests are refused from then on)."""
        form = await read_form(request)
        if form.get("confirm") != "yes":
            return bad_request(request, "Removing the API token needs the confirmation box ticked.")
        bot = await self._bot(request)
        if bot is None:
            return not_found(request, NO_SUCH_BOT)
        try:
            changed = await self._keeper.set_api_token(str(bot.id), "")
        except BotRefused:
            return not_found(request, NO_SUCH_BOT)  # removed meanwhile
        await self._audit(request, "bot_api_token", changed, "API token removed")
        raise web.HTTPSeeOther(f"{PREFIX}/bots")

    # -- helpers -------------------------------------------------------------------------

    async def _switch(self, request: web.Request, *, enabled: bool) -> web.StreamResponse:
        bot = await self._bot(request)
        if bot is None:
            return not_found(request, NO_SUCH_BOT)
        try:
            switched = await self._keeper.enable(str(bot.id), enabled)
        except BotRefused:
            return not_found(request, NO_SUCH_BOT)
        action = "bot_enable" if enabled else "bot_disable"
        await self._audit(request, action, switched, "enabled" if enabled else "disabled")
        raise web.HTTPSeeOther(f"{PREFIX}/bots")

    async def _page(
        self,
        request: web.Request,
        *,
        status: int = 200,
        error: str = "",
        entered: Mapping[str, str] | None = None,
        generated: tuple[StoredBot, str] | None = None,
    ) -> web.Response:
        """The Bots page; `generated`: a bot and the API token just generated for it, shown
        on this answer only."""
        return page(
            request,
            "bots.html",
            status=status,
            bots=await self._keeper.bots(),
            limits=LIMITS,
            error=error,
            entered=entered or {},
            generated=generated,
        )

    async def _bot(self, request: web.Request) -> StoredBot | None:
        ident = request.match_info["bot_id"]
        if not ident.isdigit() or len(ident) > MAX_ID_DIGITS:
            return None
        try:
            return await self._keeper.find(ident)
        except BotRefused:
            return None

    async def _audit(self, request: web.Request, action: str, bot: StoredBot, detail: str) -> None:
        actor = request[SESSION_KEY].actor
        entry = AuditEntry(self._clock(), actor, action, f"bot {bot.id} {bot.handle}", detail)
        await self._store.add_audit(entry)


def _summary(bot: StoredBot) -> str:
    label = f" {bot.label}" if bot.label else ""
    return f"{bot.handle}{label}: {bot.profile.shown()}"
