"""Payments in Telegram Stars for plans (`core.domain.plans`): the invoice payload, the check
a pre-checkout query gets, and a payment as the books keep it.

Invariants:
- The payload names the plan and the buyer (`plan:<plan id>:<person key>`), and is never
  trusted alone: a pre-checkout is accepted only when the plan it names exists, the
  currency is Stars (`XTR`), the amount is the plan's price today, the payer is the buyer
  the payload names and the payer is not blocked (`check_checkout`, pure).
- A payment is kept once per `telegram_payment_charge_id` (`PaymentBook.record_payment`):
  Telegram may deliver its update again, and two workers may see it; only the first one
  stored grants the plan.
- A grant extends: a one-time plan's `days` count from the later of now and the current
  plan's end; a subscription's payment runs the plan to its `subscription_expiration_date`
  (never shortening what is left). A refund revokes the person's plan.
Pure: no I/O.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass

from core.domain.plans import ActivePlan, Plan, find_plan
from core.domain.telegram_keys import PERSON_PATTERN

STARS = "XTR"
"""The currency of Telegram Stars."""
MAX_PAYLOAD_BYTES = 128
"""Telegram's limit on an invoice payload."""
MAX_CHARGE_ID_CHARS = 256
MAX_CURRENCY_CHARS = 8

_PAYLOAD = re.compile(rf"plan:([a-z0-9_-]{{1,32}}):({PERSON_PATTERN})")


def invoice_payload(plan_id: str, buyer: str) -> str:
    """The payload of `buyer`'s invoice for the plan."""
    return f"plan:{plan_id}:{buyer}"


def telegram_user_of(person: str) -> int | None:
    """The Telegram user id of a Telegram person key (`tg:42`, `tg2:42`); None for others."""
    if not re.fullmatch(PERSON_PATTERN, person):
        return None
    return int(person.rsplit(":", 1)[1])


@dataclass(frozen=True, slots=True)
class Payload:
    plan_id: str
    buyer: str


def read_payload(payload: str) -> Payload | None:
    """The plan and buyer an invoice payload names; None for anything this bot did not build."""
    if len(payload.encode()) > MAX_PAYLOAD_BYTES:
        return None
    found = _PAYLOAD.fullmatch(payload)
    return None if found is None else Payload(found.group(1), found.group(2))


class CheckoutRefusal(enum.StrEnum):
    """Why a pre-checkout query is refused; the reason's text is `checkout_<value>`."""

    FORGED = "forged"
    UNKNOWN_PLAN = "unknown_plan"
    CURRENCY = "currency"
    AMOUNT = "amount"
    PAYER = "payer"
    BLOCKED = "blocked"


def check_checkout(
    plans: Iterable[Plan],
    *,
    payload: str,
    currency: str,
    amount: int,
    payer: str,
    blocked: bool,
) -> CheckoutRefusal | None:
    """None when the payment may go ahead; else why not (see the module's invariants)."""
    named = read_payload(payload)
    if named is None:
        return CheckoutRefusal.FORGED
    plan = find_plan(plans, named.plan_id)
    if plan is None:
        return CheckoutRefusal.UNKNOWN_PLAN
    if currency != STARS:
        return CheckoutRefusal.CURRENCY
    if amount != plan.stars:
        return CheckoutRefusal.AMOUNT
    if named.buyer != payer:
        return CheckoutRefusal.PAYER
    if blocked:
        return CheckoutRefusal.BLOCKED
    return None


@dataclass(frozen=True, slots=True)
class Payment:
    """A successful payment as kept: who paid (`person`), for which plan, how much;
    `renewal_cancelled_at` (a subscription's payment, as listed) when its person's plan of
    that plan was cancelled and will not renew."""

    charge_id: str
    person: str
    plan_id: str
    stars: int
    currency: str
    payload: str
    created_at: float
    provider_charge_id: str = ""
    is_recurring: bool = False
    subscription_expires_at: float | None = None
    refunded_at: float | None = None
    renewal_cancelled_at: float | None = None


@dataclass(frozen=True, slots=True)
class Grant:
    """What a payment gives: the plan for `seconds` more from the later of now and the
    current end, and at least until `until` (a subscription's expiration; 0: none)."""

    plan_id: str
    seconds: float
    until: float = 0.0


@dataclass(frozen=True, slots=True)
class Recorded:
    """What recording a payment did: `stored` False when its charge id was kept already
    (then nothing changed); `plan` the person's plan after its grant (None: no grant)."""

    stored: bool
    plan: ActivePlan | None = None


def grant_of(plan: Plan, payment: Payment) -> Grant:
    """A subscription's payment runs to its expiration date (Telegram's, when given); a
    one-time plan lasts its days."""
    if plan.subscription and payment.subscription_expires_at is not None:
        return Grant(plan.id, 0.0, payment.subscription_expires_at)
    return Grant(plan.id, plan.seconds)


def extended_end(current_end: float | None, grant: Grant, now: float) -> float:
    """When a plan ends after `grant` (the rule the stores run in SQL, `GRANT_PLAN`)."""
    start = now if current_end is None else max(current_end, now)
    return max(start + grant.seconds, grant.until)


@dataclass(frozen=True, slots=True)
class StarsDay:
    """The payments kept on one UTC day: how many, their Stars, and the Stars of those
    refunded since (counted on the day they were paid)."""

    day: str
    payments: int
    stars: int
    refunded_stars: int = 0


@dataclass(frozen=True, slots=True)
class SalesFigures:
    """Stars by UTC day over a period (days without a payment left out), and the plans
    active now."""

    days: tuple[StarsDay, ...]
    active_plans: int
    since_day: str = ""
    until_day: str = ""

    @property
    def stars(self) -> int:
        """The Stars kept over the period (refunded ones not counted)."""
        return sum(day.stars - day.refunded_stars for day in self.days)

    @property
    def payments(self) -> int:
        return sum(day.payments for day in self.days)
