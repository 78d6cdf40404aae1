"""Plans in Telegram: /plans with a Buy button each, the invoice a press sends, the answer to a
pre-checkout query, the receipt of a payment, an operator's /refund and /cancelsub,
/paysupport and /terms.
The rules are `core.turns.plan_sales`'; this module only speaks Telegram.

Invariants:
- Plans are bought in a private chat: the invoice's payload names the plan and the
  presser (`core.domain.payments.invoice_payload`); a one-time plan is a `sendInvoice` in
  Stars (XTR, one price, an empty provider token), a subscription a `createInvoiceLink`
  with `subscription_period` 2592000 behind a URL button.
- Every pre-checkout query is answered, at once (Telegram waits 10 seconds): ok only when
  `PlanSales.checkout` finds nothing wrong, else ok False with the reason in the payer's
  language. A query from someone not on the allow-lists is refused too.
- A successful payment is passed on whoever sent it (Telegram took the Stars; it is kept
  for an operator even when it grants nothing); its receipt is sent only the first time.
- /refund answers only a user in ADMIN_USER_IDS in a private chat; Telegram refunds first
  (`refundStarPayment`), then the books are changed: a refund Telegram refused changes
  nothing here. A subscription's payment refunded is also cancelled
  (`editUserStarSubscription`), so Telegram does not renew it.
- /cancelsub answers the same operators the same way: a subscription's payment not
  refunded is cancelled with Telegram (`editUserStarSubscription`, is_canceled true) and
  nothing else changes: the plan runs to its end and is not renewed. Telegram is asked
  with this bot's token: a payment made in another bot is refused by Telegram. The cancel
  is kept on the person's plan (`PlanSales.mark_renewal`): /plans then tells them their
  plan ends and is not renewed. /resumesub undoes both (is_canceled false): the person may
  renew the subscription again.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, LabeledPrice, Update
from telegram.error import TelegramError

from bot.commands.refusals import Refusals
from bot.transport.chat import Context, Incoming
from bot.transport.say import Say
from bot.updates.buttons import Press
from core.domain.facts import telegram_person
from core.domain.payments import MAX_CHARGE_ID_CHARS, STARS, CheckoutRefusal, telegram_user_of
from core.domain.plans import SUBSCRIPTION_PERIOD_SECONDS, Plan
from core.turns.plan_sales import Holding, Paid, PlanSales
from i18n.languages import language_for
from i18n.translate import t

log = logging.getLogger(__name__)

BUY = "buy"
"""The kind of a Buy button's callback data (`buy:<plan id>`)."""
MAX_TITLE_CHARS = 32
"""Telegram's limit on an invoice's title."""
_CHARGE = re.compile(rf"[A-Za-z0-9_.:-]{{1,{MAX_CHARGE_ID_CHARS}}}")


def sells_plans(sales: PlanSales | None) -> bool:
    """Whether the bot sells plans: then /plans, /paysupport and /terms are in its menus
    and /help, and the quota message offers /plans."""
    return sales is not None and bool(sales.plans)


def when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M")


def plan_line(plan: Plan, language: str) -> str:
    title = plan.title(language)
    if plan.subscription:
        return t(language, "plan_line_subscription", title=title, stars=plan.stars)
    return t(language, "plan_line", title=title, stars=plan.stars, days=plan.days)


def plans_text(plans: tuple[Plan, ...], holding: Holding | None, language: str) -> str:
    """The plans on sale, each with its description, and the person's current plan."""
    lines = [t(language, "plans_header"), ""]
    for plan in plans:
        lines.append(plan_line(plan, language))
        description = plan.description(language)
        if description != plan.title(language):
            lines.append(description)
        lines.append("")
    if holding is None:
        lines.append(t(language, "plans_no_current"))
    else:
        title = holding.active.plan_id if holding.plan is None else holding.plan.title(language)
        said = "plans_current" if holding.active.renewal_cancelled_at is None else "plans_ending"
        lines.append(t(language, said, title=title, ends=when(holding.active.ends_at)))
    return "\n".join(lines)


def plans_keyboard(plans: tuple[Plan, ...], language: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton(
                    t(language, "plan_buy_button", title=plan.title(language), stars=plan.stars),
                    callback_data=f"{BUY}:{plan.id}",
                )
            ]
            for plan in plans
        ]
    )


def buyer_of(user_id: int | None, scope: int) -> str | None:
    """The person key a Telegram user buys, pays and holds plans as in the bot of `scope`:
    the one place that names it, so an invoice's buyer, the payer and the plan's holder are
    always the same key, and a plan belongs to the bot it was bought in."""
    return None if user_id is None else telegram_person(user_id, scope)


class PlanCommands:
    """/plans, the Buy presses, /refund, /paysupport, /terms, and the payment updates."""

    def __init__(
        self,
        sales: PlanSales,
        *,
        say: Say,
        refuse: Refusals,
        admin_user_ids: frozenset[int],
        allowed_user_ids: frozenset[int] = frozenset(),
        support_text: str = "",
        terms_text: str = "",
        scope: int = 0,
    ) -> None:
        """`allowed_user_ids`: ALLOWED_USER_IDS (empty: anyone may pay)."""
        self.sales = sales
        self.allowed_users = allowed_user_ids
        self.scope = scope
        self.say = say
        self.refuse = refuse
        self.admins = admin_user_ids
        self.support_text = support_text
        self.terms_text = terms_text

    async def plans(self, incoming: Incoming, context: Context) -> None:
        """The plans with a Buy button each, and the person's current plan."""
        language = incoming.language
        if not self.sales.plans:
            await self.say(incoming, t(language, "plans_none"))
            return
        if incoming.is_group:
            await self.say(incoming, t(language, "plans_private_only"))
            return
        person = buyer_of(incoming.user_id, self.scope)
        holding = None if person is None else await self.sales.holding(person)
        await self.say(
            incoming,
            plans_text(self.sales.plans, holding, language),
            keyboard=plans_keyboard(self.sales.plans, language),
        )

    async def buy(self, incoming: Incoming, value: str, context: Context, press: Press) -> None:
        """A Buy press: the invoice for that plan, made out to the presser."""
        language = incoming.language
        plan = self.sales.plan(value)
        person = None if incoming.anonymous_admin else buyer_of(incoming.user_id, self.scope)
        if plan is None:
            await press.answer(t(language, "plan_gone"))
            return
        if incoming.is_group or person is None:
            await press.answer(t(language, "plans_private_only"))
            return
        await press.answer()
        title = plan.title(language)[:MAX_TITLE_CHARS]
        description = plan.description(language)
        payload = self.sales.payload(plan, person)
        prices = [LabeledPrice(title, plan.stars)]
        if plan.subscription:
            link = await context.bot.create_invoice_link(
                title,
                description,
                payload,
                STARS,
                prices,
                provider_token="",
                subscription_period=SUBSCRIPTION_PERIOD_SECONDS,
            )
            button = InlineKeyboardButton(
                t(language, "plan_subscribe_button", stars=plan.stars), url=link
            )
            await self.say(
                incoming,
                t(language, "plan_subscribe", title=title, stars=plan.stars),
                keyboard=InlineKeyboardMarkup([[button]]),
            )
            return
        await context.bot.send_invoice(
            incoming.chat_id,
            title,
            description,
            payload,
            STARS,
            prices,
            provider_token="",
        )

    async def on_checkout(self, update: Update, context: Context) -> None:
        """Answer a pre-checkout query: ok, or refused with the reason."""
        query = update.pre_checkout_query
        if query is None:
            return
        language = language_for(query.from_user.language_code)
        refusal = await self.sales.checkout(
            payer=buyer_of(query.from_user.id, self.scope) or "",
            payload=query.invoice_payload,
            currency=query.currency,
            amount=query.total_amount,
        )
        if refusal is None and self.allowed_users and query.from_user.id not in self.allowed_users:
            refusal = self.sales.refuse(CheckoutRefusal.BLOCKED)
        if refusal is None:
            await query.answer(ok=True)
        else:
            log.info("pre-checkout refused: %s", refusal.value)
            await query.answer(ok=False, error_message=t(language, f"checkout_{refusal.value}"))

    async def on_paid(self, update: Update, context: Context) -> None:
        """Keep a successful payment, grant its plan, and send the receipt (once)."""
        message = update.effective_message
        if message is None or message.successful_payment is None or message.from_user is None:
            return
        payment = message.successful_payment
        language = language_for(message.from_user.language_code)
        expires = payment.subscription_expiration_date
        receipt = await self.sales.paid(
            Paid(
                payer=buyer_of(message.from_user.id, self.scope) or "",
                charge_id=payment.telegram_payment_charge_id,
                payload=payment.invoice_payload,
                currency=payment.currency,
                amount=payment.total_amount,
                at=message.date.timestamp(),
                provider_charge_id=payment.provider_payment_charge_id or "",
                is_recurring=bool(payment.is_recurring),
                subscription_expires_at=None if expires is None else expires.timestamp(),
            )
        )
        if not receipt.stored:
            charge = payment.telegram_payment_charge_id[:80]
            log.info("payment %s delivered again: nothing changed", charge)
            return
        charge = payment.telegram_payment_charge_id[:MAX_CHARGE_ID_CHARS]  # as kept
        if receipt.plan is None or receipt.active is None:
            text = t(language, "paid_not_granted", charge=charge)
        else:
            text = t(
                language,
                "paid_receipt",
                title=receipt.plan.title(language),
                ends=when(receipt.active.ends_at),
                charge=charge,
            )
        await message.reply_text(text)

    async def _operators_charge(
        self, incoming: Incoming, context: Context, usage: str
    ) -> str | None:
        """The charge id an operator's command names in a private chat; None (and said
        why) for anyone else, in a group, or without exactly one well-formed id."""
        language = incoming.language
        if incoming.user_id not in self.admins or incoming.anonymous_admin:
            await self.refuse(incoming, t(language, "not_allowed"))
            return None
        if incoming.is_group:
            await self.say(incoming, t(language, "quota_private_only"))
            return None
        args = context.args or []
        if len(args) != 1 or not _CHARGE.fullmatch(args[0]):
            await self.say(incoming, t(language, usage))
            return None
        return args[0]

    async def refund(self, incoming: Incoming, context: Context) -> None:
        """/refund <charge id>: Telegram refunds the Stars, then the plan is revoked."""
        language = incoming.language
        charge = await self._operators_charge(incoming, context, "refund_usage")
        if charge is None:
            return
        payment = await self.sales.payment(charge)
        user_id = None if payment is None else telegram_user_of(payment.person)
        if payment is None or payment.refunded_at is not None or user_id is None:
            await self.say(incoming, t(language, "refund_unknown"))
            return
        try:
            await context.bot.refund_star_payment(user_id, payment.charge_id)
        except TelegramError as exc:
            await self.say(incoming, t(language, "refund_failed", reason=str(exc)[:200]))
            return
        if payment.subscription_expires_at is not None:  # and no renewal after it
            try:
                await context.bot.edit_user_star_subscription(
                    user_id, payment.charge_id, is_canceled=True
                )
            except TelegramError as exc:  # refunded: the books follow; the renewal is logged
                log.warning("subscription %s not cancelled: %s", payment.charge_id, exc)
        refunded = await self.sales.refund(payment.charge_id)
        if refunded is None:  # refunded meanwhile by another operator
            await self.say(incoming, t(language, "refund_unknown"))
            return
        await self.say(
            incoming, t(language, "refund_done", stars=refunded.stars, person=refunded.person)
        )

    async def cancel_subscription(self, incoming: Incoming, context: Context) -> None:
        """/cancelsub <charge id>: Telegram stops renewing the subscription; the plan runs
        to its end."""
        await self._edit_subscription(incoming, context, canceled=True)

    async def resume_subscription(self, incoming: Incoming, context: Context) -> None:
        """/resumesub <charge id>: the person may renew a subscription cancelled here again."""
        await self._edit_subscription(incoming, context, canceled=False)

    async def _edit_subscription(
        self, incoming: Incoming, context: Context, *, canceled: bool
    ) -> None:
        language = incoming.language
        said = "cancelsub" if canceled else "resumesub"
        charge = await self._operators_charge(incoming, context, f"{said}_usage")
        if charge is None:
            return
        payment = await self.sales.payment(charge)
        user_id = None if payment is None else telegram_user_of(payment.person)
        if (
            payment is None
            or user_id is None
            or payment.refunded_at is not None
            or payment.subscription_expires_at is None
        ):
            await self.say(incoming, t(language, "cancelsub_unknown"))
            return
        try:
            await context.bot.edit_user_star_subscription(
                user_id, payment.charge_id, is_canceled=canceled
            )
        except TelegramError as exc:
            await self.say(incoming, t(language, f"{said}_failed", reason=str(exc)[:200]))
            return
        log.info("subscription %s %s by an operator", payment.charge_id[:80], said)
        await self.sales.mark_renewal(payment, cancelled=canceled)
        holding = await self.sales.holding(payment.person)
        ends = payment.subscription_expires_at if holding is None else holding.active.ends_at
        await self.say(
            incoming, t(language, f"{said}_done", person=payment.person, ends=when(ends))
        )

    async def paysupport(self, incoming: Incoming, context: Context) -> None:
        await self.say(incoming, self.support_text or t(incoming.language, "paysupport_none"))

    async def terms(self, incoming: Incoming, context: Context) -> None:
        await self.say(incoming, self.terms_text or t(incoming.language, "terms_none"))
