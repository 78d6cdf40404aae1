"""`/admin/payments`: the payments in Telegram Stars, newest first, filtered by person and
plan, an operator's refund, and a subscription cancelled without a refund.

Invariants: the filters take only a person key as the console names people and a plan id
as PLANS writes them; a charge id in a path is 1-256 of `A-Za-z0-9_.:-`; anything else is
400 or 404 before the store is asked. A refund POST passes the gate's CSRF check, needs its
confirmation box, asks Telegram first (`refundStarPayment`): a refund Telegram refused
changes nothing; then the payment is marked refunded, the plan revoked and the audit entry
written in one transaction (`PaymentBook.refund`). The plan's end applies to this process's
next turn at once and to other workers' within `core.domain.quotas.OVERRIDE_CACHE_SECONDS`.
A cancel POST (a subscription's payment not refunded) passes the same checks, asks Telegram
`editUserStarSubscription` with is_canceled true and writes `cancel_subscription` in the
audit log and, in the same transaction, keeps the cancel on the person's plan (the plan
runs to its end and is not renewed; the page then offers Resume renewal instead). A resume
POST asks Telegram with is_canceled false and clears it, writing `resume_subscription`.
Telegram is asked with the token of the bot the payment was made in (its person's scope).
The plan filter offers every bot's plans, an id two bots sell labelled by its bots.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import quote

from aiohttp import web

from admin.auth import SESSION_KEY, read_form
from admin.config import PREFIX
from admin.people import PERSON, person_link
from admin.ports import StarRefunds
from admin.render import bad_request, not_found, page
from core.domain.audit import AuditEntry
from core.domain.payments import MAX_CHARGE_ID_CHARS, Payment, telegram_user_of
from core.domain.ports import PaymentBook
from core.domain.telegram_keys import scope_of
from core.turns.engine import Engine

PAGE = 100
CHARGE = re.compile(rf"[A-Za-z0-9_.:-]{{1,{MAX_CHARGE_ID_CHARS}}}")
_PLAN = re.compile(r"[a-z0-9_-]{1,32}")

PlanChoices = Callable[[], Awaitable[Sequence[tuple[str, str]]]]
"""The plan filter's options: each plan id some bot sells, and its label."""


async def no_plans() -> Sequence[tuple[str, str]]:
    return ()


class PaymentPages:
    def __init__(
        self,
        book: PaymentBook,
        engine: Engine,
        clock: Callable[[], float],
        *,
        plans: PlanChoices = no_plans,
        refunds: StarRefunds | None = None,
        on_refund: Callable[[int], None] | None = None,
    ) -> None:
        """`plans` the plan filter's options; `refunds` reaches Telegram (None: no bot
        token here, so no refunds); `on_refund` hears each refund made, with its bot's scope
        (the metrics)."""
        self._on_refund = on_refund
        self._book = book
        self._engine = engine
        self._clock = clock
        self._plans = plans
        self._refunds = refunds

    async def list(self, request: web.Request) -> web.StreamResponse:
        person = request.query.get("person", "").strip()
        plan = request.query.get("plan", "").strip()
        if person and not PERSON.fullmatch(person):
            return bad_request(request, "A person is tg:<user id> or api:<userId>.")
        if plan and not _PLAN.fullmatch(plan):
            return bad_request(request, "A plan is its id as PLANS names it.")
        payments = await self._book.payments(
            person=person or None, plan_id=plan or None, limit=PAGE
        )
        rows = [(p, person_link(p.person), quote(p.charge_id, safe="")) for p in payments]
        return page(
            request,
            "payments.html",
            rows=rows,
            person=person,
            plan=plan,
            plans=await self._plans(),
            refunds=self._refunds is not None,
            total=sum(p.stars for p in payments if p.refunded_at is None),
        )

    async def _confirmed(
        self, request: web.Request, what: str
    ) -> tuple[Payment, int, int, StarRefunds] | web.StreamResponse:
        """The payment a POST names, its user id and bot scope, once the confirmation box
        is ticked and it is not refunded; else the page saying why."""
        charge = request.match_info["charge_id"]
        if not CHARGE.fullmatch(charge):
            return not_found(request, "No such payment.")
        form = await read_form(request)
        if form.get("confirm") != "yes":
            return bad_request(request, f"{what} needs the confirmation box ticked.")
        if self._refunds is None:
            return bad_request(
                request, "This needs TELEGRAM_BOT_TOKEN or SECRET_KEY in this process."
            )
        payment = await self._book.payment(charge)
        if payment is None:
            return not_found(request, "No such payment.")
        user_id = telegram_user_of(payment.person)
        scope = scope_of(payment.person)
        if payment.refunded_at is not None or user_id is None or scope is None:
            return bad_request(request, "This payment was refunded already.")
        return payment, user_id, scope, self._refunds

    async def refund(self, request: web.Request) -> web.StreamResponse:
        confirmed = await self._confirmed(request, "Refunding")
        if isinstance(confirmed, web.StreamResponse):
            return confirmed
        payment, user_id, scope, refunds = confirmed
        refused = await refunds.refund_stars(scope, user_id, payment.charge_id)
        if refused is not None:
            return bad_request(request, f"Telegram refused the refund: {refused[:200]}")
        if payment.subscription_expires_at is not None:  # refunded: no renewal after it
            await refunds.cancel_subscription(scope, user_id, payment.charge_id)
        now = self._clock()
        detail = f"{payment.stars} stars, plan {payment.plan_id or 'none'}, {payment.person}"
        audit = AuditEntry(now, request[SESSION_KEY].actor, "refund", payment.charge_id, detail)
        refunded = await self._book.refund(payment.charge_id, at=now, audit=audit)
        self._engine.quotas.refresh(payment.person)
        if refunded is not None and self._on_refund is not None:
            self._on_refund(scope)
        raise web.HTTPSeeOther(f"{PREFIX}/payments")

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        """Cancel a subscription without refunding it: Telegram first, then the books."""
        return await self._renewal(request, cancelled=True)

    async def resume(self, request: web.Request) -> web.StreamResponse:
        """Let a subscription cancelled here renew again: Telegram first, then the books."""
        return await self._renewal(request, cancelled=False)

    async def _renewal(self, request: web.Request, *, cancelled: bool) -> web.StreamResponse:
        confirmed = await self._confirmed(request, "Cancelling" if cancelled else "Resuming")
        if isinstance(confirmed, web.StreamResponse):
            return confirmed
        payment, user_id, scope, refunds = confirmed
        if payment.subscription_expires_at is None:
            return bad_request(request, "This payment is no subscription: nothing to change.")
        refused = await refunds.cancel_subscription(
            scope, user_id, payment.charge_id, canceled=cancelled
        )
        if refused is not None:
            said = "cancel" if cancelled else "resume"
            return bad_request(request, f"Telegram refused the {said}: {refused[:200]}")
        now = self._clock()
        action = "cancel_subscription" if cancelled else "resume_subscription"
        detail = f"plan {payment.plan_id or 'none'}, {payment.person}, " + (
            "not renewed" if cancelled else "renewed again"
        )
        entry = AuditEntry(now, request[SESSION_KEY].actor, action, payment.charge_id, detail)
        await self._book.cancel_renewal(
            payment.person, payment.plan_id, at=now if cancelled else None, audit=entry
        )
        raise web.HTTPSeeOther(f"{PREFIX}/payments")
