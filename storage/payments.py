"""Rows of the payment tables as `core.domain` values, for both stores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.domain.payments import Payment
from core.domain.plans import ActivePlan


def payment_from_row(row: Sequence[Any]) -> Payment:
    """A row of `PAYMENT_COLUMNS`, in its order, and maybe whether its renewal was
    cancelled (`SELECT_PAYMENTS`' last column)."""
    (charge, person, plan, stars, currency, payload, created, provider, recurring, until, back) = (
        row[:11]
    )
    cancelled = row[11] if len(row) > 11 else None
    return Payment(
        charge_id=charge,
        person=person,
        plan_id=plan,
        stars=int(stars),
        currency=currency,
        payload=payload,
        created_at=float(created),
        provider_charge_id=provider,
        is_recurring=bool(recurring),
        subscription_expires_at=None if until is None else float(until),
        refunded_at=None if back is None else float(back),
        renewal_cancelled_at=None if cancelled is None else float(cancelled),
    )


def plan_from_row(row: Sequence[Any]) -> ActivePlan:
    """A row of `PLAN_COLUMNS`, in its order."""
    person, plan_id, ends_at, charge_id, cancelled = row
    return ActivePlan(
        person,
        plan_id,
        float(ends_at),
        charge_id or "",
        None if cancelled is None else float(cancelled),
    )


def payment_values(payment: Payment) -> tuple[Any, ...]:
    """`INSERT_PAYMENT`'s arguments."""
    return (
        payment.charge_id,
        payment.provider_charge_id,
        payment.person,
        payment.plan_id,
        payment.stars,
        payment.currency,
        payment.payload,
        payment.is_recurring,
        payment.subscription_expires_at,
        payment.created_at,
    )
