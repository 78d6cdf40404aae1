"""The payment book (`core.domain.ports.PaymentBook`) on SQLite: payments and people's plans
read on the store's reader and written on its writer. A payment and its grant are one
write (one SAVEPOINT of the writer's transaction, `storage.sqlite.batch`): the store has one
writer, so a charge id stored twice at once is inserted once and granted once."""

from __future__ import annotations

import sqlite3

from core.domain.audit import AuditEntry
from core.domain.payments import Grant, Payment, Recorded, StarsDay
from core.domain.plans import ActivePlan
from core.domain.telegram_keys import key_range
from storage.payments import payment_from_row, payment_values, plan_from_row
from storage.sqlite.admin import add_audit
from storage.sqlite.batch import BatchedConnection
from storage.sqlite.placeholders import sqlite_sql
from storage.statements.payments import (
    ACTIVE_PLANS,
    CANCEL_RENEWAL,
    GRANT_PLAN,
    INSERT_PAYMENT,
    MARK_REFUNDED,
    RESUME_RENEWAL,
    REVOKE_PLAN,
    SELECT_PAYMENT,
    SELECT_PAYMENTS,
    SELECT_PLAN,
    STARS_BY_DAY,
)

_INSERT_PAYMENT = sqlite_sql(INSERT_PAYMENT)
_GRANT_PLAN = sqlite_sql(GRANT_PLAN.format(greatest="MAX"))
_SELECT_PLAN = sqlite_sql(SELECT_PLAN)
_SELECT_PAYMENT = sqlite_sql(SELECT_PAYMENT)
_MARK_REFUNDED = sqlite_sql(MARK_REFUNDED)
_REVOKE_PLAN = sqlite_sql(REVOKE_PLAN)
_SELECT_PAYMENTS = sqlite_sql(SELECT_PAYMENTS)
_STARS_BY_DAY = sqlite_sql(STARS_BY_DAY.format(day="strftime('%Y-%m-%d', created_at, 'unixepoch')"))
_ACTIVE_PLANS = sqlite_sql(ACTIVE_PLANS)
_CANCEL_RENEWAL = sqlite_sql(CANCEL_RENEWAL)
_RESUME_RENEWAL = sqlite_sql(RESUME_RENEWAL)


class SqlitePayments:
    """`PaymentBook` on the store's reader and writer connections."""

    def __init__(self, reader: BatchedConnection, writer: BatchedConnection) -> None:
        self._reader = reader
        self._writer = writer

    async def record_payment(self, payment: Payment, grant: Grant | None) -> Recorded:
        def work(db: sqlite3.Connection) -> Recorded:
            if db.execute(_INSERT_PAYMENT, payment_values(payment)).fetchone() is None:
                return Recorded(stored=False)
            if grant is None:
                return Recorded(stored=True)
            at, charge = payment.created_at, payment.charge_id
            return Recorded(True, _grant(db, payment.person, grant, at, charge))

        return await self._writer.run(work)

    async def grant(self, person: str, grant: Grant, *, at: float) -> ActivePlan:
        return await self._writer.run(lambda db: _grant(db, person, grant, at, ""))

    async def active_plan(self, person: str, now: float) -> ActivePlan | None:
        def read(db: sqlite3.Connection) -> ActivePlan | None:
            row = db.execute(_SELECT_PLAN, (person, now)).fetchone()
            return None if row is None else plan_from_row(row)

        return await self._reader.run(read)

    async def payment(self, charge_id: str) -> Payment | None:
        def read(db: sqlite3.Connection) -> Payment | None:
            row = db.execute(_SELECT_PAYMENT, (charge_id,)).fetchone()
            return None if row is None else payment_from_row(row)

        return await self._reader.run(read)

    async def refund(
        self, charge_id: str, *, at: float, audit: AuditEntry | None = None
    ) -> Payment | None:
        def work(db: sqlite3.Connection) -> Payment | None:
            row = db.execute(_MARK_REFUNDED, (charge_id, at)).fetchone()
            if row is None:
                return None
            refunded = payment_from_row(row)
            db.execute(_REVOKE_PLAN, (refunded.person,))
            if audit is not None:
                add_audit(db, audit)
            return refunded

        return await self._writer.run(work)

    async def cancel_renewal(
        self, person: str, plan_id: str, *, at: float | None, audit: AuditEntry | None = None
    ) -> ActivePlan | None:
        def work(db: sqlite3.Connection) -> ActivePlan | None:
            if at is None:
                row = db.execute(_RESUME_RENEWAL, (person, plan_id)).fetchone()
            else:
                row = db.execute(_CANCEL_RENEWAL, (person, plan_id, at)).fetchone()
            if audit is not None:
                add_audit(db, audit)
            return None if row is None else plan_from_row(row)

        return await self._writer.run(work)

    async def payments(
        self, *, person: str | None = None, plan_id: str | None = None, limit: int = 50
    ) -> list[Payment]:
        return await self._reader.run(
            lambda db: [
                payment_from_row(row)
                for row in db.execute(_SELECT_PAYMENTS, (person, plan_id, limit))
            ]
        )

    async def stars_by_day(
        self, since: float, until: float, *, scope: int | None = None
    ) -> list[StarsDay]:
        keys = None if scope is None else key_range(scope)
        return await self._reader.run(
            lambda db: [
                StarsDay(row[0], int(row[1]), int(row[2]), int(row[3]))
                for row in db.execute(_STARS_BY_DAY, (since, until, keys))
            ]
        )

    async def active_plans(self, now: float, *, scope: int | None = None) -> int:
        keys = None if scope is None else key_range(scope)
        return await self._reader.run(
            lambda db: int(db.execute(_ACTIVE_PLANS, (now, keys)).fetchone()[0])
        )


def _grant(
    db: sqlite3.Connection, person: str, grant: Grant, at: float, charge_id: str
) -> ActivePlan:
    values = (person, grant.plan_id, at, grant.seconds, grant.until, charge_id)
    return plan_from_row(db.execute(_GRANT_PLAN, values).fetchone())
