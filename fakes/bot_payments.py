"""The payment methods of the fake Bot API, for Telegram Stars: invoices, invoice links
(subscriptions), pre-checkout answers, refunds and subscription changes, checked as
Telegram checks them for the currency XTR.

Invariant: every answer is recorded where a test reads it (`checkout_answers`, `refunds`,
`subscription_edits`); a pre-checkout query is answered at most once, a charge refunded at
most once, and only queries and charges the builders made (`fakes.bot_updates`) are known;
with several bots, a charge is known only to the bot its payment was pushed to (another
bot's refundStarPayment or editUserStarSubscription is CHARGE_NOT_FOUND, as in Telegram).
"""

from __future__ import annotations

import itertools
from typing import Any

from fakes.bot_updates import JSON

PAYMENT_METHODS = frozenset(
    {
        "sendInvoice",
        "createInvoiceLink",
        "answerPreCheckoutQuery",
        "refundStarPayment",
        "editUserStarSubscription",
    }
)
SUBSCRIPTION_PERIOD = 2_592_000
Answer = tuple[int, dict[str, Any]]


def _ok(result: Any) -> Answer:
    return 200, {"ok": True, "result": result}


def _bad(description: str) -> Answer:
    return 400, {"ok": False, "error_code": 400, "description": f"Bad Request: {description}"}


class BotPayments:
    """Mixed into the fake Bot API with `fakes.bot_updates.UpdateBuilder`."""

    checkout_ids: dict[str, int]
    charges: dict[str, int]

    def __init__(self) -> None:
        self.checkout_answers: dict[str, tuple[bool, str | None]] = {}
        """Each pre-checkout query answered: id → (ok, error_message)."""
        self.refunds: list[tuple[int, str]] = []
        """(user id, charge id) of each refund made."""
        self.subscription_edits: list[tuple[int, str, bool]] = []
        """(user id, charge id, is_canceled) of each subscription changed."""
        self.charge_bots: dict[str, str] = {}
        """Each charge pushed in a payment: the token of the bot it was paid to."""
        self.payment_tokens: list[tuple[str, str, str]] = []
        """(method, charge id, token) of each refund and subscription change made."""
        self.invoice_links: list[str] = []
        self._links = itertools.count(1)

    def _send_invoice_message(self, p: dict[str, Any], invoice: JSON) -> Answer:
        raise NotImplementedError  # the server's

    def payment_call(self, method: str, p: dict[str, Any], token: str = "") -> Answer:
        """Answer one of `PAYMENT_METHODS` as Telegram would (`token`: the bot asking, ""
        when the server serves one bot)."""
        if method in ("sendInvoice", "createInvoiceLink"):
            problem = _invoice_problem(p, link=method == "createInvoiceLink")
            if problem:
                return _bad(problem)
            if method == "createInvoiceLink":
                link = f"https://t.me/$fakeinvoice{next(self._links)}"
                self.invoice_links.append(link)
                return _ok(link)
            invoice = {
                "title": p["title"],
                "description": p["description"],
                "start_parameter": "",
                "currency": p["currency"],
                "total_amount": p["prices"][0]["amount"],
            }
            return self._send_invoice_message(p, invoice)
        if method == "answerPreCheckoutQuery":
            return self._answer_checkout(p)
        charge = str(p.get("telegram_payment_charge_id"))
        if self.charge_bots.get(charge, token) != token:
            return _bad("CHARGE_NOT_FOUND")  # paid to another bot
        answer = self._refund(p) if method == "refundStarPayment" else self._edit_subscription(p)
        if answer[0] == 200:
            self.payment_tokens.append((method, charge, token))
        return answer

    def _answer_checkout(self, p: dict[str, Any]) -> Answer:
        query_id = str(p.get("pre_checkout_query_id"))
        if query_id not in self.checkout_ids or query_id in self.checkout_answers:
            return _bad("QUERY_ID_INVALID")
        ok = p.get("ok")
        if not isinstance(ok, bool):
            return _bad("ok must be a boolean")
        message = p.get("error_message")
        if not ok and not (isinstance(message, str) and message.strip()):
            return _bad("ERROR_MESSAGE_EMPTY")
        self.checkout_answers[query_id] = (ok, message)
        return _ok(True)

    def _refund(self, p: dict[str, Any]) -> Answer:
        charge = str(p.get("telegram_payment_charge_id"))
        user_id = p.get("user_id")
        if self.charges.get(charge) != user_id:
            return _bad("CHARGE_NOT_FOUND")
        if any(refunded == charge for _, refunded in self.refunds):
            return _bad("CHARGE_ALREADY_REFUNDED")
        self.refunds.append((int(user_id), charge))
        return _ok(True)

    def _edit_subscription(self, p: dict[str, Any]) -> Answer:
        charge = str(p.get("telegram_payment_charge_id"))
        user_id = p.get("user_id")
        canceled = p.get("is_canceled")
        if self.charges.get(charge) != user_id or not isinstance(canceled, bool):
            return _bad("CHARGE_NOT_FOUND" if isinstance(canceled, bool) else "is_canceled")
        self.subscription_edits.append((int(user_id), charge, canceled))
        return _ok(True)


def _invoice_problem(p: dict[str, Any], *, link: bool) -> str | None:
    """What Telegram would refuse in an invoice in Stars; None when it is fine."""
    title, description, payload = p.get("title"), p.get("description"), p.get("payload")
    if not isinstance(title, str) or not 1 <= len(title) <= 32:
        return "INVOICE_TITLE_INVALID"
    if not isinstance(description, str) or not 1 <= len(description) <= 255:
        return "INVOICE_DESCRIPTION_INVALID"
    if not isinstance(payload, str) or not 1 <= len(payload.encode()) <= 128:
        return "INVOICE_PAYLOAD_INVALID"
    if p.get("currency") != "XTR":
        return "CURRENCY_INVALID (only XTR here)"
    if p.get("provider_token"):
        return "PAYMENT_PROVIDER_INVALID (Stars take an empty provider token)"
    prices = p.get("prices")
    if not isinstance(prices, list) or len(prices) != 1:
        return "CURRENCY_TOTAL_AMOUNT_INVALID (one price in Stars)"
    amount = prices[0].get("amount") if isinstance(prices[0], dict) else None
    if not isinstance(amount, int) or isinstance(amount, bool) or amount < 1:
        return "CURRENCY_TOTAL_AMOUNT_INVALID"
    period = p.get("subscription_period")
    if period is not None and (not link or period != SUBSCRIPTION_PERIOD):
        return "SUBSCRIPTION_PERIOD_INVALID"
    if not link and "chat_id" not in p:
        return "chat_id is empty"
    return None
