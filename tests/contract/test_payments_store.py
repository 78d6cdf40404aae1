"""What both stores keep of payments in Stars and people's plans (`m033_payments`,
`m035_subscription_cancels`, `PaymentBook`): a payment stored and granted exactly once per
charge id, however many callers (and workers) record it at once; a grant that extends from
the later of now and the current end; a refund that revokes the plan once; a subscription
cancelled until it is resumed or renewed; one bot's figures."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from core.domain.audit import AuditEntry
from core.domain.payments import Grant, Payment, StarsDay
from tests.store_contract import Rows, StoreKind

if TYPE_CHECKING:
    from app.stores import Store

NOW = 1_795_694_400.0
DAY = 86_400.0


def paid(charge: str = "ch-1", person: str = "tg:42", **fields: object) -> Payment:
    values: dict[str, object] = {
        "charge_id": charge,
        "person": person,
        "plan_id": "pro",
        "stars": 250,
        "currency": "XTR",
        "payload": f"plan:pro:{person}",
        "created_at": NOW,
        "provider_charge_id": "",
    }
    values.update(fields)
    return Payment(**values)  # type: ignore[arg-type]


MONTH = Grant("pro", 30 * DAY)


async def test_a_payment_reads_back_and_grants_its_plan(store: Store) -> None:
    """A recorded payment is kept as given and the person's plan runs `days` from now."""
    recorded = await store.payments.record_payment(paid(is_recurring=True), MONTH)
    plan = recorded.plan
    assert recorded.stored and plan is not None
    assert (plan.person, plan.plan_id, plan.ends_at, plan.charge_id) == (
        "tg:42",
        "pro",
        NOW + 30 * DAY,
        "ch-1",
    )
    assert await store.payments.payment("ch-1") == paid(is_recurring=True)
    assert await store.payments.active_plan("tg:42", NOW) == plan
    assert await store.payments.active_plan("tg:42", NOW + 30 * DAY) is None
    assert await store.payments.active_plan("tg2:42", NOW) is None  # another bot's person


async def test_the_same_charge_recorded_twice_is_kept_and_granted_once(
    store: Store, rows: Rows
) -> None:
    """A redelivered payment stores nothing and extends nothing."""
    await store.payments.record_payment(paid(), MONTH)
    again = await store.payments.record_payment(paid(created_at=NOW + 5), MONTH)
    assert not again.stored and again.plan is None
    assert await rows("payments") == 1
    plan = await store.payments.active_plan("tg:42", NOW)
    assert plan is not None and plan.ends_at == NOW + 30 * DAY


async def test_concurrent_records_of_one_charge_grant_once(store: Store, rows: Rows) -> None:
    """Twenty records of one charge at once: one stored, one grant."""
    outcomes = await asyncio.gather(
        *(store.payments.record_payment(paid(), MONTH) for _ in range(20))
    )
    assert sum(outcome.stored for outcome in outcomes) == 1
    assert sum(outcome.plan is not None for outcome in outcomes) == 1
    assert await rows("payments") == 1
    plan = await store.payments.active_plan("tg:42", NOW)
    assert plan is not None and plan.ends_at == NOW + 30 * DAY


async def test_two_workers_recording_one_charge_grant_once(
    kind: StoreKind, database: str, rows: Rows
) -> None:
    """Two stores open on one database (two workers) record one charge at once: one grant."""
    first, second = await kind.open(database), await kind.open(database)
    try:
        outcomes = await asyncio.gather(
            *(
                worker.payments.record_payment(paid(), MONTH)
                for _ in range(10)
                for worker in (first, second)
            )
        )
        assert sum(outcome.stored for outcome in outcomes) == 1
        assert await rows("payments") == 1
        plan = await first.payments.active_plan("tg:42", NOW)
        assert plan is not None and plan.ends_at == NOW + 30 * DAY
    finally:
        await first.close()
        await second.close()


async def test_different_charges_of_one_person_at_once_all_extend(store: Store) -> None:
    """Five payments of one person at once extend the plan five times (none is lost)."""
    await asyncio.gather(*(store.payments.record_payment(paid(f"ch-{n}"), MONTH) for n in range(5)))
    plan = await store.payments.active_plan("tg:42", NOW)
    assert plan is not None and plan.ends_at == NOW + 150 * DAY


async def test_a_grant_extends_from_the_later_of_now_and_the_current_end(store: Store) -> None:
    """A plan still running is extended from its end; an expired one from now."""
    await store.payments.grant("tg:42", MONTH, at=NOW)
    running = await store.payments.grant("tg:42", MONTH, at=NOW + DAY)
    assert running.ends_at == NOW + 60 * DAY
    later = NOW + 100 * DAY
    expired = await store.payments.grant("tg:42", Grant("max", 7 * DAY), at=later)
    assert (expired.plan_id, expired.ends_at) == ("max", later + 7 * DAY)


async def test_a_subscription_runs_to_its_expiration_and_never_shortens(store: Store) -> None:
    """A subscription's grant runs to its expiration date, keeping a later end."""
    first = await store.payments.grant("tg:42", Grant("pro", 0.0, NOW + 30 * DAY), at=NOW)
    assert first.ends_at == NOW + 30 * DAY
    renewed = await store.payments.grant("tg:42", Grant("pro", 0.0, NOW + 60 * DAY), at=NOW)
    assert renewed.ends_at == NOW + 60 * DAY
    stale = await store.payments.grant("tg:42", Grant("pro", 0.0, NOW + 10 * DAY), at=NOW)
    assert stale.ends_at == NOW + 60 * DAY


async def test_a_refund_revokes_the_plan_once(store: Store) -> None:
    """A refund marks the payment and removes the person's plan; a second one does nothing."""
    await store.payments.record_payment(paid(), MONTH)
    refunded = await store.payments.refund("ch-1", at=NOW + 60)
    assert refunded is not None and refunded.refunded_at == NOW + 60
    assert await store.payments.active_plan("tg:42", NOW) is None
    assert await store.payments.refund("ch-1", at=NOW + 61) is None
    assert await store.payments.refund("no-such-charge", at=NOW) is None
    again = await store.payments.payment("ch-1")
    assert again is not None and again.refunded_at == NOW + 60


async def test_payments_are_listed_latest_first_and_filtered(store: Store) -> None:
    """The list is by time, newest first, of one person or plan when asked."""
    await store.payments.record_payment(paid("a", "tg:1", created_at=NOW), None)
    await store.payments.record_payment(paid("b", "tg:2", created_at=NOW + 1), None)
    await store.payments.record_payment(paid("c", "tg:1", plan_id="max", created_at=NOW + 2), None)
    listed = await store.payments.payments()
    assert [p.charge_id for p in listed] == ["c", "b", "a"]
    assert [p.charge_id for p in await store.payments.payments(person="tg:1")] == ["c", "a"]
    assert [p.charge_id for p in await store.payments.payments(plan_id="pro")] == ["b", "a"]
    assert [p.charge_id for p in await store.payments.payments(limit=1)] == ["c"]
    assert await store.payments.active_plan("tg:1", NOW) is None  # recorded without a grant


async def test_stars_are_summed_by_utc_day_and_plans_counted(store: Store) -> None:
    """Payments in a period by UTC day (refunds counted apart), and the plans active now."""
    midnight = 1_795_651_200.0  # a UTC midnight
    await store.payments.record_payment(paid("d1", created_at=midnight - 1), MONTH)
    await store.payments.record_payment(paid("d2", "tg:2", created_at=midnight), MONTH)
    await store.payments.record_payment(
        paid("d3", "tg:3", created_at=midnight + 5, stars=100), MONTH
    )
    await store.payments.refund("d3", at=midnight + 10)
    days = await store.payments.stars_by_day(midnight - DAY, midnight + DAY)
    assert [(d.day, d.payments, d.stars, d.refunded_stars) for d in days] == [
        ("2026-11-25", 1, 250, 0),
        ("2026-11-26", 2, 350, 100),
    ]
    assert await store.payments.stars_by_day(midnight, midnight + 1) == [
        StarsDay("2026-11-26", 1, 250, 0)
    ]
    assert await store.payments.active_plans(midnight + 20) == 2
    assert await store.payments.active_plans(midnight + 40 * DAY) == 0


SUBSCRIPTION = Grant("pro", 0.0, NOW + 30 * DAY)


def subscribed(charge: str = "sub-1", **fields: object) -> Payment:
    return paid(charge, **{"subscription_expires_at": NOW + 30 * DAY, **fields})


async def test_a_cancelled_renewal_is_kept_on_the_plan_and_its_payments(
    store: Store, rows: Rows
) -> None:
    """A cancel marks the person's plan and every payment of that subscription, with its
    audit entry; a resume clears it; a one-time payment and another plan's are not marked."""
    await store.payments.record_payment(subscribed(), SUBSCRIPTION)
    await store.payments.record_payment(paid("once", plan_id="max", created_at=NOW - 9), None)
    entry = AuditEntry(NOW + 5, "operator", "cancel_subscription", "sub-1", "not renewed")
    cancelled = await store.payments.cancel_renewal("tg:42", "pro", at=NOW + 5, audit=entry)
    assert cancelled is not None and cancelled.renewal_cancelled_at == NOW + 5
    assert cancelled.ends_at == NOW + 30 * DAY  # the plan runs to its end
    held = await store.payments.active_plan("tg:42", NOW)
    assert held is not None and held.renewal_cancelled_at == NOW + 5
    listed = {p.charge_id: p.renewal_cancelled_at for p in await store.payments.payments()}
    assert listed == {"sub-1": NOW + 5, "once": None}
    one = await store.payments.payment("sub-1")
    assert one is not None and one.renewal_cancelled_at == NOW + 5
    assert await rows("admin_audit") == 1
    resumed = await store.payments.cancel_renewal("tg:42", "pro", at=None)
    assert resumed is not None and resumed.renewal_cancelled_at is None
    again = await store.payments.payment("sub-1")
    assert again is not None and again.renewal_cancelled_at is None


async def test_a_renewal_paid_after_a_cancel_clears_it(store: Store) -> None:
    """A recurring payment arriving anyway extends the plan, which renews again."""
    await store.payments.record_payment(subscribed(), SUBSCRIPTION)
    await store.payments.cancel_renewal("tg:42", "pro", at=NOW + 5)
    renewal = subscribed(
        "sub-2",
        is_recurring=True,
        created_at=NOW + 30 * DAY,
        subscription_expires_at=NOW + 60 * DAY,
    )
    recorded = await store.payments.record_payment(renewal, Grant("pro", 0.0, NOW + 60 * DAY))
    assert recorded.plan is not None and recorded.plan.renewal_cancelled_at is None
    assert recorded.plan.ends_at == NOW + 60 * DAY
    assert [p.renewal_cancelled_at for p in await store.payments.payments()] == [None, None]


async def test_a_cancel_of_a_plan_not_held_keeps_nothing_but_its_audit(
    store: Store, rows: Rows
) -> None:
    """No plan of that id (another plan held, or none): nothing is marked; the audit stays."""
    await store.payments.record_payment(subscribed(), SUBSCRIPTION)
    entry = AuditEntry(NOW, "operator", "cancel_subscription", "x", "")
    assert await store.payments.cancel_renewal("tg:42", "max", at=NOW, audit=entry) is None
    assert await store.payments.cancel_renewal("tg:7", "pro", at=NOW) is None
    held = await store.payments.active_plan("tg:42", NOW)
    assert held is not None and held.renewal_cancelled_at is None
    assert await rows("admin_audit") == 1


async def test_stars_and_active_plans_of_one_bot(store: Store) -> None:
    """With a scope, only that bot's people count (`tg:` is bot 0, `tg2:` bot 2, never
    `tg21:`)."""
    for charge, person in (("a", "tg:1"), ("b", "tg2:1"), ("c", "tg2:2"), ("d", "tg21:1")):
        await store.payments.record_payment(paid(charge, person), MONTH)
    since, until = NOW - DAY, NOW + DAY
    everyone = await store.payments.stars_by_day(since, until)
    assert [(d.payments, d.stars) for d in everyone] == [(4, 1000)]
    bot2 = await store.payments.stars_by_day(since, until, scope=2)
    assert [(d.payments, d.stars) for d in bot2] == [(2, 500)]
    bot0 = await store.payments.stars_by_day(since, until, scope=0)
    assert [(d.payments, d.stars) for d in bot0] == [(1, 250)]
    assert await store.payments.stars_by_day(since, until, scope=3) == []
    assert await store.payments.active_plans(NOW) == 4
    assert await store.payments.active_plans(NOW, scope=2) == 2
    assert await store.payments.active_plans(NOW, scope=21) == 1
    assert await store.payments.active_plans(NOW, scope=0) == 1
