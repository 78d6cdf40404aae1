"""Selling plans for Telegram Stars: the checks and the books behind /plans, the invoice, the
pre-checkout query, the payment and the refund (`core.domain.payments`).

Invariants:
- A subscription cancelled with Telegram (`mark_renewal`) is kept on its person's plan until
  it is resumed or a grant (a renewal paid anyway) clears it.
- A pre-checkout is accepted only by `core.domain.payments.check_checkout` (the plan exists,
  Stars, the plan's price today, the payer is the buyer the payload names, not blocked).
- A successful payment is kept once per charge id whatever it says (Telegram took the Stars:
  an operator must be able to see and refund it), and grants its plan only when it names an
  existing plan bought by its payer, in the same transaction as it is kept
  (`PaymentBook.record_payment`): a payment delivered twice, or seen by two workers, grants
  once. People are their person keys (a bot's person: `tg:42`, `tg2:42`), so a plan belongs
  to the bot it was bought in.
- What is kept of a payment is bounded (charge ids, currency and payload cut to their
  Telegram sizes), whatever an update carries.
- A plan granted or revoked here applies to the person's next turn on this worker at once
  (`refresh`, the quota keeper's cache), on other workers within
  `core.domain.quotas.OVERRIDE_CACHE_SECONDS`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from core.domain.audit import AuditEntry
from core.domain.payments import (
    MAX_CHARGE_ID_CHARS,
    MAX_CURRENCY_CHARS,
    MAX_PAYLOAD_BYTES,
    CheckoutRefusal,
    Payment,
    check_checkout,
    grant_of,
    invoice_payload,
    read_payload,
)
from core.domain.plans import ActivePlan, Plan, find_plan
from core.domain.telegram_keys import DEFAULT_SCOPE, scope_of

if TYPE_CHECKING:
    from core.domain.ports import PaymentBook


@dataclass(frozen=True, slots=True)
class Paid:
    """A `successful_payment` as Telegram sent it, and who sent it (`payer`, a person key)."""

    payer: str
    charge_id: str
    payload: str
    currency: str
    amount: int
    at: float
    provider_charge_id: str = ""
    is_recurring: bool = False
    subscription_expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class Receipt:
    """What a payment did: `stored` False for one kept already (nothing changed); `plan`
    and `active` the plan granted and the person's plan now (None: nothing granted)."""

    stored: bool
    plan: Plan | None = None
    active: ActivePlan | None = None


@dataclass(frozen=True, slots=True)
class Holding:
    """A person's current plan (`plan` None when PLANS no longer lists it)."""

    active: ActivePlan
    plan: Plan | None


class SalesEvents(Protocol):
    """What the metrics hear of sales (`telemetry.metrics.Metrics` is one)."""

    def record_payment(self, plan: str, stars: int, *, bot: int = 0) -> None: ...

    def record_refund(self, *, bot: int = 0) -> None: ...

    def record_checkout_refusal(self, reason: str) -> None: ...


class PlanSales:
    """The plans on sale and the books of their payments."""

    def __init__(
        self,
        book: PaymentBook,
        plans: tuple[Plan, ...],
        clock: Callable[[], float],
        *,
        blocked: Callable[[str], Awaitable[bool]],
        refresh: Callable[[str], None],
        events: SalesEvents | None = None,
    ) -> None:
        """`blocked` says whether an operator blocked a person; `refresh` tells the quota
        keeper a person's plan changed; `events` hears each payment kept, refund and
        refused checkout (the metrics)."""
        self._events = events
        self._book = book
        self.plans = plans
        self._clock = clock
        self._blocked = blocked
        self._refresh = refresh

    def plan(self, plan_id: str) -> Plan | None:
        return find_plan(self.plans, plan_id)

    def payload(self, plan: Plan, buyer: str) -> str:
        return invoice_payload(plan.id, buyer)

    async def checkout(
        self, *, payer: str, payload: str, currency: str, amount: int
    ) -> CheckoutRefusal | None:
        """None when the payment may go ahead, else why not (a forged or unknown payload
        costs no read of the store)."""
        refusal = check_checkout(
            self.plans,
            payload=payload,
            currency=currency,
            amount=amount,
            payer=payer,
            blocked=False,
        )
        if refusal is None and await self._blocked(payer):
            refusal = CheckoutRefusal.BLOCKED
        return refusal if refusal is None else self.refuse(refusal)

    def refuse(self, refusal: CheckoutRefusal) -> CheckoutRefusal:
        """`refusal`, counted (also one decided at the edge: not on the allow-lists)."""
        if self._events is not None:
            self._events.record_checkout_refusal(refusal.value)
        return refusal

    async def paid(self, paid: Paid) -> Receipt:
        """Keep the payment once and grant what it bought (see the module's invariants)."""
        named = read_payload(paid.payload)
        plan = None if named is None else self.plan(named.plan_id)
        if named is not None and named.buyer != paid.payer:
            plan = None  # paid by another than the buyer: kept, not granted
        payment = Payment(
            charge_id=paid.charge_id[:MAX_CHARGE_ID_CHARS],
            person=paid.payer,
            plan_id="" if named is None else named.plan_id,
            stars=paid.amount,
            currency=paid.currency[:MAX_CURRENCY_CHARS],
            payload=paid.payload[: 2 * MAX_PAYLOAD_BYTES],
            created_at=paid.at,
            provider_charge_id=paid.provider_charge_id[:MAX_CHARGE_ID_CHARS],
            is_recurring=paid.is_recurring,
            subscription_expires_at=paid.subscription_expires_at,
        )
        grant = None if plan is None else grant_of(plan, payment)
        recorded = await self._book.record_payment(payment, grant)
        if recorded.plan is not None:
            self._refresh(paid.payer)
        if recorded.stored and self._events is not None:
            self._events.record_payment(
                "none" if plan is None else plan.id, payment.stars, bot=_bot_of(payment.person)
            )
        return Receipt(recorded.stored, plan if recorded.stored else None, recorded.plan)

    async def refund(self, charge_id: str, audit: AuditEntry | None = None) -> Payment | None:
        """Mark the payment refunded and revoke its person's plan (with the console's
        `audit` entry); None when there is no such payment or it was refunded already.
        (Telegram is asked first, by the caller.)"""
        refunded = await self._book.refund(charge_id, at=self._clock(), audit=audit)
        if refunded is not None:
            self._refresh(refunded.person)
            if self._events is not None:
                self._events.record_refund(bot=_bot_of(refunded.person))
        return refunded

    async def payment(self, charge_id: str) -> Payment | None:
        return await self._book.payment(charge_id)

    async def mark_renewal(
        self, payment: Payment, *, cancelled: bool, audit: AuditEntry | None = None
    ) -> ActivePlan | None:
        """Keep that the subscription `payment` paid for is not renewed (`cancelled`), or
        renews again; the person's plan now (None: they hold no plan of that id). Telegram
        is asked first, by the caller."""
        at = self._clock() if cancelled else None
        return await self._book.cancel_renewal(payment.person, payment.plan_id, at=at, audit=audit)

    async def holding(self, person: str) -> Holding | None:
        """The person's plan now, if any."""
        active = await self._book.active_plan(person, self._clock())
        return None if active is None else Holding(active, self.plan(active.plan_id))

    async def plan_of(self, person: str) -> Plan | None:
        """The person's active plan (the quota keeper's per-person source of limits and
        models); None without one, or when these plans no longer list it."""
        if not self.plans:
            return None
        held = await self.holding(person)
        return None if held is None else held.plan


def _bot_of(person: str) -> int:
    """The scope of the bot a payer paid (a Telegram person key of any scope; else 0)."""
    scope = scope_of(person)
    return DEFAULT_SCOPE if scope is None else scope
