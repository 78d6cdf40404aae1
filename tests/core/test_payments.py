"""The invoice payload and the pre-checkout check: only a payment for an existing plan, in
Stars, at its price, by the buyer the payload names and not blocked, goes ahead."""

from __future__ import annotations

import pytest

from core.domain.payments import (
    CheckoutRefusal,
    Grant,
    Payment,
    check_checkout,
    extended_end,
    grant_of,
    invoice_payload,
    read_payload,
)
from core.domain.plans import Plan

PRO = Plan("pro", (("en", "Pro"),), (), stars=250, days=30)
SUB = Plan("sub", (("en", "Sub"),), (), stars=100, days=30, subscription=True)


def check(**changes: object) -> CheckoutRefusal | None:
    values: dict[str, object] = {
        "payload": invoice_payload("pro", "tg:42"),
        "currency": "XTR",
        "amount": 250,
        "payer": "tg:42",
        "blocked": False,
    }
    values.update(changes)
    return check_checkout((PRO, SUB), **values)  # type: ignore[arg-type]


def test_the_payload_names_plan_and_buyer_of_any_bot() -> None:
    """A payload reads back as the plan and the buyer, a scoped person key too."""
    assert read_payload("plan:pro:tg:42") is not None
    named = read_payload(invoice_payload("pro", "tg2:42"))
    assert named is not None and (named.plan_id, named.buyer) == ("pro", "tg2:42")


@pytest.mark.parametrize(
    "payload",
    [
        "",
        "plan:pro",
        "plan:pro:api:bob",
        "plan:PRO:tg:42",
        "plan:pro:tg:42:extra",
        "plan:pro:tg:042",
        "plan:pro:tg0:42",
        "x" * 10_000,
        "plan:pro:tg:42\n",
    ],
)
def test_a_forged_payload_is_refused(payload: str) -> None:
    """A payload this bot did not build is refused as forged."""
    assert check(payload=payload) is CheckoutRefusal.FORGED


def test_only_the_right_payment_goes_ahead() -> None:
    """Each wrong part is refused with its own reason; the right payment is accepted."""
    assert check() is None
    assert check(payload=invoice_payload("gold", "tg:42")) is CheckoutRefusal.UNKNOWN_PLAN
    assert check(currency="USD") is CheckoutRefusal.CURRENCY
    assert check(amount=249) is CheckoutRefusal.AMOUNT
    assert check(amount=100) is CheckoutRefusal.AMOUNT
    assert check(payer="tg:43") is CheckoutRefusal.PAYER
    assert check(payer="tg2:42") is CheckoutRefusal.PAYER
    assert check(blocked=True) is CheckoutRefusal.BLOCKED


def test_a_grant_is_days_or_the_subscriptions_expiration() -> None:
    """A one-time plan adds its days; a subscription runs to its expiration date."""
    payment = Payment("c", "tg:42", "sub", 100, "XTR", "p", 1000.0, subscription_expires_at=5e6)
    assert grant_of(SUB, payment) == Grant("sub", 0.0, 5e6)
    assert grant_of(PRO, payment) == Grant("pro", 30 * 86_400.0)
    assert extended_end(None, Grant("pro", 10.0), now=100.0) == 110.0
    assert extended_end(500.0, Grant("pro", 10.0), now=100.0) == 510.0
    assert extended_end(50.0, Grant("pro", 10.0), now=100.0) == 110.0
    assert extended_end(500.0, Grant("sub", 0.0, 300.0), now=100.0) == 500.0
