"""The console's refunds in Telegram Stars: `refundStarPayment` (and, for a subscription,
`editUserStarSubscription`) called on the Bot API with the deployment's bot token, over
aiohttp (the console's process runs no Telegram bot).

Invariant: a refund is refused (a description returned) unless Telegram answered `ok: true`;
a Telegram that cannot be reached, or answers too much or no JSON, is a refusal too, so the
console changes nothing in its books; the token never appears in what is returned.
"""

from __future__ import annotations

import json

import aiohttp

REFUND_TIMEOUT_SECONDS = 15.0
MAX_ANSWER_BYTES = 64 * 1024


class TelegramStarRefunds:
    """`admin.ports.StarRefunds` through the Bot API at `api_base_url` (…/bot)."""

    def __init__(self, token: str, api_base_url: str) -> None:
        self._base = f"{api_base_url}{token}/"
        self._token = token

    async def refund_stars(self, user_id: int, charge_id: str) -> str | None:
        body = {"user_id": user_id, "telegram_payment_charge_id": charge_id}
        return await self._call("refundStarPayment", body)

    async def cancel_subscription(self, user_id: int, charge_id: str) -> str | None:
        body = {"user_id": user_id, "telegram_payment_charge_id": charge_id, "is_canceled": True}
        return await self._call("editUserStarSubscription", body)

    async def _call(self, method: str, body: dict[str, object]) -> str | None:
        """None when Telegram answered `ok: true`, else why not (never the token)."""
        timeout = aiohttp.ClientTimeout(total=REFUND_TIMEOUT_SECONDS)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(self._base + method, json=body) as response,
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
        return said.replace(self._token, "…")[:200]
