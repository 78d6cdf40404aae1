"""A person's plan as the quota's per-person limits, on both stores: with an active plan the
plan's limits apply instead of the deployment's, under concurrency exactly as the
deployment's do (thirty turns admitted at once are held to the plan's token limit); a refund
puts the deployment's limits back at once."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from core.domain.payments import invoice_payload
from core.domain.plans import Plan, PlanLimits
from core.domain.quotas import QuotaConfig, QuotaExceeded, Stage
from core.domain.usage import Payer
from core.turns.plan_sales import Paid, PlanSales
from core.turns.quota_checks import Quotas

if TYPE_CHECKING:
    from app.stores import Store

NOW = 1_795_694_400.0
PRO = Plan("pro", (("en", "Pro"),), (), stars=250, days=30, limits=PlanLimits(daily_tokens=1000))
PERSON = "tg:42"


async def never_blocked(person: str) -> bool:
    return False


def keeper(store: Store) -> tuple[Quotas, PlanSales]:
    quotas = Quotas(store, QuotaConfig(user_daily_tokens=100), lambda: NOW)
    sales = PlanSales(
        store.payments, (PRO,), lambda: NOW, blocked=never_blocked, refresh=quotas.refresh
    )
    quotas.use_plans(sales.plan_of)
    return quotas, sales


async def admitted(quotas: Quotas, turns: int) -> int:
    """How many of `turns` turns of 100 tokens, admitted at once, get through."""

    async def one() -> bool:
        try:
            await quotas.admit(Payer(person=PERSON), Stage.START, 100)
        except QuotaExceeded:
            return False
        return True

    return sum(await asyncio.gather(*(one() for _ in range(turns))))


async def test_a_plans_token_limit_holds_under_concurrency(store: Store) -> None:
    """Thirty turns at once: one within the deployment's 100 tokens, ten within the plan's 1000."""
    quotas, sales = keeper(store)
    assert await admitted(quotas, 30) == 1
    payload = invoice_payload("pro", PERSON)
    receipt = await sales.paid(Paid(PERSON, "ch-1", payload, "XTR", 250, at=NOW))
    assert receipt.stored and receipt.active is not None
    assert (await quotas.of_person(PERSON)).limits.plan == "pro"
    assert await admitted(quotas, 30) == 9  # the first turn's 100 tokens are still held


async def test_a_refund_puts_the_deployments_limits_back(store: Store) -> None:
    """After a refund the next turn is checked against the deployment's limits again."""
    quotas, sales = keeper(store)
    await sales.paid(Paid(PERSON, "ch-1", invoice_payload("pro", PERSON), "XTR", 250, at=NOW))
    assert await admitted(quotas, 1) == 1
    assert await sales.refund("ch-1") is not None
    assert await admitted(quotas, 1) == 0
    assert (await quotas.of_person(PERSON)).limits.daily_tokens == 100
