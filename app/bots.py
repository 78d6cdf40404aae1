"""The operator's bots: added after Telegram confirms the token, listed, changed, disabled and
removed — one service for `consultation-bot bots` (`app.bots_cli`) and the console's Bots
page (`admin.bots`).

Invariants:
- a token is checked before anything is stored: its shape (`TOKEN_SHAPE`, at most
  `MAX_TOKEN_CHARS`), then `getMe` at TELEGRAM_API_BASE_URL; a token Telegram refuses, the
  deployment's own bot (TELEGRAM_BOT_TOKEN's) or a bot already added is `BotRefused` and
  stores nothing;
- a token is stored only sealed under SECRET_KEY (`app.bot_secrets`); no message, list or
  error here holds it, nor the URL that carries it — only its last four characters;
- settings are parsed strictly (`core.domain.bots.parse_profile`); a role must be one of
  the prompt library's, a language one of the complete interface languages, and so must
  every language a plan's title or description is given in (`plans`, as PLANS);
- BOT names a bot by its id or `@username`, among the bots not removed;
- a bot's API token (`set_api_token`) is stored as its SHA-256 only, never shown or logged
  (it is redacted from the logs as soon as it is read); it is refused when it is
  API_TOKEN or another bot's, changing nothing.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass

import aiohttp

from app.bot_secrets import TokenBox, TokenUnreadable, no_secret_key, tail_of
from app.logs import redact_also
from app.settings import Settings
from core.domain.bots import (
    API_TOKEN_SHAPE,
    BotExists,
    BotProfile,
    BotRefused,
    NewBot,
    ProfileInvalid,
    StoredBot,
    api_token_digest,
    changed_profile,
    check_label,
)
from core.domain.ports import BotRegistry
from core.prompting.prompts import PromptLibrary

MAX_TOKEN_CHARS = 200
TOKEN_SHAPE = re.compile(r"([0-9]{1,20}):[A-Za-z0-9_-]{1,150}")
"""A Bot API token as @BotFather gives it: the bot's id, a colon, the secret."""
GETME_TIMEOUT_SECONDS = 15.0
MAX_GETME_BYTES = 64 * 1024
USERNAME = re.compile(r"[A-Za-z0-9_]{1,64}")


@dataclass(frozen=True, slots=True)
class TelegramBot:
    """Who a token belongs to, as getMe answered."""

    id: int
    username: str


async def get_me(token: str, api_base_url: str) -> TelegramBot:
    """The bot `token` belongs to, by the Bot API's getMe; `BotRefused` when its shape is
    wrong, Telegram refuses it or cannot be reached (the message never holds the token)."""
    if len(token) > MAX_TOKEN_CHARS or not TOKEN_SHAPE.fullmatch(token):
        raise BotRefused(
            "that is not a bot token: @BotFather gives one like 123456789:AAE…, "
            "digits, a colon and up to 150 letters, digits, _ or -"
        )
    timeout = aiohttp.ClientTimeout(total=GETME_TIMEOUT_SECONDS)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"{api_base_url}{token}/getMe") as response,
        ):
            body = b""  # at most MAX_GETME_BYTES + 1: enough to tell an answer too long
            while len(body) <= MAX_GETME_BYTES and (
                chunk := await response.content.read(MAX_GETME_BYTES + 1 - len(body))
            ):
                body += chunk
            status = response.status
    except (aiohttp.ClientError, TimeoutError, ValueError):
        raise BotRefused(
            "Telegram could not be reached to check the token (TELEGRAM_API_BASE_URL); "
            "nothing was added, try again"
        ) from None
    try:
        answer = json.loads(body) if len(body) <= MAX_GETME_BYTES else {}
    except ValueError:
        answer = {}
    if not isinstance(answer, dict):
        answer = {}
    if status == 401 or answer.get("error_code") == 401:
        raise BotRefused(
            "Telegram refused the token (401 Unauthorized): copy it again from @BotFather "
            "(/mybots → API Token); nothing was added"
        )
    result = answer.get("result")
    if status != 200 or not answer.get("ok") or not isinstance(result, dict):
        described = " ".join(str(answer.get("description", "")).replace(token, "…").split())[:200]
        raise BotRefused(f"Telegram did not confirm the token (HTTP {status} {described})".strip())
    bot_id, username = result.get("id"), result.get("username")
    if (
        not isinstance(bot_id, int)
        or not isinstance(username, str)
        or not USERNAME.fullmatch(username)
    ):
        raise BotRefused("Telegram's answer to getMe names no bot; nothing was added")
    return TelegramBot(bot_id, username)


class BotKeeper:
    """Adds, lists, changes and removes the operator's bots in `registry`."""

    def __init__(
        self,
        registry: BotRegistry,
        *,
        secret_key: str | None,
        api_base_url: str,
        main_token: str | None,
        roles: Collection[str],
        languages: Collection[str],
        clock: Callable[[], float] = time.time,
        forget_bot: Callable[[int], Awaitable[int]] | None = None,
        api_token: str | None = None,
    ) -> None:
        """`forget_bot` deletes what a bot's scope stored (the store's `forget_bot`);
        without it `forget_data` refuses. `api_token` is the deployment's API_TOKEN (no
        bot may have it)."""
        self._registry = registry
        self._api_token = api_token
        self._forget_bot = forget_bot
        self._secret_key = secret_key
        self._api_base_url = api_base_url
        self._main_id = _bot_id_of(main_token)
        self._roles = roles
        self._languages = languages
        self._clock = clock

    async def add(self, token: str, profile: BotProfile, *, label: str = "") -> StoredBot:
        """Check `token` with Telegram and store the bot; `BotRefused` storing nothing."""
        self._check(profile)
        label = self._label(label)
        if not self._secret_key:
            raise BotRefused(
                "SECRET_KEY is not set: it encrypts the added bots' tokens. Set one "
                "(e.g. `openssl rand -hex 32`) and keep it; nothing was added"
            )
        token = token.strip()
        redact_also(token)
        me = await get_me(token, self._api_base_url)
        if me.id == self._main_id:
            raise BotRefused(
                f"@{me.username} is this deployment's own bot (TELEGRAM_BOT_TOKEN); "
                "nothing was added"
            )
        sealed = await asyncio.to_thread(TokenBox(self._secret_key).seal, token)
        new = NewBot(me.id, me.username, sealed, tail_of(token), label, profile)
        try:
            return await self._registry.add_bot(new, at=self._clock())
        except BotExists as exists:
            raise BotRefused(f"{exists}; nothing was added") from None

    async def bots(self) -> list[StoredBot]:
        return await self._registry.bots()

    async def find(self, ref: str) -> StoredBot:
        """The bot `ref` (an id or `@username`) names; `BotRefused` when none does."""
        ref = ref.strip()
        for bot in await self._registry.bots():
            if ref.isdigit() and int(ref) == bot.id:
                return bot
            if ref.startswith("@") and ref[1:].lower() == bot.username.lower():
                return bot
        shown = ref[:70].encode("unicode_escape").decode("ascii")
        raise BotRefused(f"no bot {shown!r}: name one by its id or @username (`bots list`)")

    async def change(self, ref: str, changes: Mapping[str, str]) -> StoredBot:
        """Apply `key=value` changes (`SETTABLE`) to the bot `ref` names."""
        bot = await self.find(ref)
        label = changes.get("label")
        profile = changed_profile(bot.profile, {k: v for k, v in changes.items() if k != "label"})
        self._check(profile)
        return await self._update(
            bot, profile=profile, label=None if label is None else self._label(label)
        )

    async def set_api_token(self, ref: str, token: str) -> StoredBot:
        """Give the bot `ref` names `token` as its own HTTP API token (an empty one: take
        its token away); `BotRefused` changing nothing for a token of another shape,
        API_TOKEN itself or another bot's."""
        token = token.strip()
        if token:
            redact_also(token)
        bot = await self.find(ref)
        if token and not API_TOKEN_SHAPE.fullmatch(token):
            raise BotRefused(
                "api_token: 32 to 256 letters, digits or . _ ~ + / = - (`openssl rand -hex "
                "32` makes one); nothing was changed"
            )
        if token and self._api_token and token == self._api_token:
            raise BotRefused("api_token: that is API_TOKEN, the operator's; nothing was changed")
        digest = api_token_digest(token) if token else None
        try:
            updated = await self._registry.set_bot_api_token(bot.id, digest, at=self._clock())
        except BotExists as other:
            raise BotRefused(
                f"api_token: {other.existing.handle} has that token; nothing was changed"
            ) from None
        if updated is None:
            raise BotRefused(f"bot #{bot.id} {bot.handle} was removed meanwhile")
        return updated

    async def enable(self, ref: str, enabled: bool) -> StoredBot:
        return await self._update(await self.find(ref), enabled=enabled)

    async def remove(self, ref: str) -> StoredBot:
        """Mark the bot removed (its polling or webhook stops; its data stays)."""
        bot = await self.find(ref)
        if not await self._registry.remove_bot(bot.id, at=self._clock()):
            raise BotRefused(f"bot #{bot.id} {bot.handle} was removed meanwhile")
        return bot

    async def forget_data(self, bot: StoredBot) -> int:
        """Delete what the removed `bot` stored, in one transaction (`forget_bot` of its
        scope); how many consultations went. A bot still served is refused."""
        if self._forget_bot is None:
            raise BotRefused("deleting a bot's data is not possible here; nothing was deleted")
        if any(other.id == bot.id for other in await self._registry.bots()):
            raise BotRefused(f"bot #{bot.id} {bot.handle} is not removed; nothing was deleted")
        return await self._forget_bot(bot.id)

    async def _update(
        self,
        bot: StoredBot,
        *,
        enabled: bool | None = None,
        profile: BotProfile | None = None,
        label: str | None = None,
    ) -> StoredBot:
        updated = await self._registry.update_bot(
            bot.id, at=self._clock(), enabled=enabled, profile=profile, label=label
        )
        if updated is None:
            raise BotRefused(f"bot #{bot.id} {bot.handle} was removed meanwhile")
        return updated

    def _check(self, profile: BotProfile) -> None:
        try:
            if profile.role is not None and profile.role not in self._roles:
                raise ProfileInvalid(
                    f"role: {profile.role!r} is none of the prompt library's "
                    f"({', '.join(sorted(self._roles))})"
                )
            if profile.language is not None and profile.language not in self._languages:
                raise ProfileInvalid(
                    f"language: {profile.language!r} is none of {', '.join(self._languages)}"
                )
            for plan in profile.plans or ():
                for code, _ in (*plan.titles, *plan.descriptions):
                    if code not in self._languages:
                        raise ProfileInvalid(
                            f"plans: plan {plan.id!r} has a text in {code!r}, none of "
                            f"{', '.join(self._languages)}"
                        )
        except ProfileInvalid as invalid:
            raise BotRefused(str(invalid)) from None

    @staticmethod
    def _label(label: str) -> str:
        try:
            return check_label(label.strip())
        except ProfileInvalid as invalid:
            raise BotRefused(str(invalid)) from None


def _bot_id_of(token: str | None) -> int | None:
    """The bot id a token starts with (TELEGRAM_BOT_TOKEN's), None without one."""
    match = TOKEN_SHAPE.fullmatch(token or "")
    return int(match.group(1)) if match else None


async def check_stored_bots(registry: BotRegistry, secret_key: str | None) -> int:
    """How many bots are stored, once each one's token opens under `secret_key`; a
    `StartupError` in one line when one does not or SECRET_KEY is missing. Without stored
    bots it reads one count and imports nothing more (`app.lean_imports`)."""
    from app.startup import StartupError

    stored = await registry.count_bots()
    if not stored:
        return 0
    if not secret_key:
        raise StartupError(no_secret_key(stored))
    box = TokenBox(secret_key)
    for bot in await registry.bots():
        try:
            await asyncio.to_thread(box.open, bot)
        except TokenUnreadable as unreadable:
            raise StartupError(f"SECRET_KEY: {unreadable}") from None
    return stored


def keeper_for(
    settings: Settings,
    registry: BotRegistry,
    forget_bot: Callable[[int], Awaitable[int]] | None = None,
) -> BotKeeper:
    """The deployment's `BotKeeper`: its SECRET_KEY, Bot API address, own bot, roles and
    interface languages; `forget_bot` the store's, to delete a removed bot's data."""
    from i18n.languages import LANGUAGES

    return BotKeeper(
        registry,
        secret_key=settings.secret("secret_key"),
        api_base_url=settings.telegram_api_base_url,
        main_token=settings.secret("telegram_bot_token"),
        roles=frozenset(PromptLibrary(settings.prompts_dir).roles()),
        languages=LANGUAGES,
        forget_bot=forget_bot,
        api_token=settings.secret("api_token"),
    )
