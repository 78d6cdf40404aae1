"""The console's refunds and subscription cancels in Telegram Stars: `refundStarPayment` and
`editUserStarSubscription` called on the Bot API with the token of the bot the payment was
made in (scope 0: TELEGRAM_BOT_TOKEN; scope n: stored bot n's, opened under SECRET_KEY,
`app.bot_secrets`), over aiohttp (the console's process runs no Telegram bot).

Invariant: a call is refused (a description returned) unless Telegram answered `ok: true`;
a Telegram that cannot be reached, or answers too much or no JSON, or a bot whose token is
not at hand here, is a refusal too, so the console changes nothing in its books; no token
ever appears in what is returned.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import aiohttp

from core.domain.ports import BotRegistry
from core.domain.telegram_keys import DEFAULT_SCOPE

REFUND_TIMEOUT_SECONDS = 15.0
MAX_ANSWER_BYTES = 64 * 1024


TokenOf = Callable[[int], Awaitable[str | None]]
"""The token of the bot of a scope; None when this process has none for it."""


def bot_tokens(main_token: str | None, registry: BotRegistry, secret_key: str | None) -> TokenOf:
    """Scope 0: `main_token`; scope n: stored bot n's token (not removed), opened under
    `secret_key`; None when there is none, or it cannot be opened."""

    async def token_of(scope: int) -> str | None:
        if scope == DEFAULT_SCOPE:
            return main_token or None
        if not secret_key:
            return None
        bot = next((b for b in await registry.bots() if b.id == scope), None)
        if bot is None:
            return None
        from app.bot_secrets import TokenBox, TokenUnreadable
        from app.logs import redact_also

        try:
            token = await asyncio.to_thread(TokenBox(secret_key).open, bot)
        except TokenUnreadable:
            return None
        redact_also(token)
        return token

    return token_of


class TelegramStarRefunds:
    """`admin.ports.StarRefunds` through the Bot API at `api_base_url` (…/bot)."""

    def __init__(self, tokens: TokenOf, api_base_url: str) -> None:
        self._tokens = tokens
        self._api_base_url = api_base_url

    async def refund_stars(self, scope: int, user_id: int, charge_id: str) -> str | None:
        body = {"user_id": user_id, "telegram_payment_charge_id": charge_id}
        return await self._call(scope, "refundStarPayment", body)

    async def cancel_subscription(
        self, scope: int, user_id: int, charge_id: str, *, canceled: bool = True
    ) -> str | None:
        body = {
            "user_id": user_id,
            "telegram_payment_charge_id": charge_id,
            "is_canceled": canceled,
        }
        return await self._call(scope, "editUserStarSubscription", body)

    async def _call(self, scope: int, method: str, body: dict[str, object]) -> str | None:
        """None when Telegram answered `ok: true`, else why not (never the token)."""
        token = await self._tokens(scope)
        if not token:
            return f"no token here for the bot this payment was made in (bot #{scope})"
        timeout = aiohttp.ClientTimeout(total=REFUND_TIMEOUT_SECONDS)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(f"{self._api_base_url}{token}/{method}", json=body) as response,
            ):
                text = await response.content.read(MAX_ANSWER_BYTES + 1)
        except (aiohttp.ClientError, TimeoutError):
            return "Telegram could not be reached; nothing was changed, try again"
        try:
            answer = json.loads(text) if len(text) <= MAX_ANSWER_BYTES else {}
        except ValueError:
            answer = {}
        if isinstance(answer, dict) and answer.get("ok") is True:
            return None
        description = answer.get("description") if isinstance(answer, dict) else None
        said = str(description) if description else "no answer Telegram gives"
        return said.replace(token, "…")[:200]
