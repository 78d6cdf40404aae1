"""The payment book (`core.domain.ports.PaymentBook`) on PostgreSQL, through the store's calls
on its pool. A payment and its grant are one transaction: the INSERT of a charge id another
worker is storing waits for that transaction and then inserts nothing (the primary key), so
only one of them grants; a grant adds to the person's end in the database (one UPSERT), so
two payments of one person at once both count."""

from __future__ import annotations

import asyncpg

from core.domain.audit import AuditEntry
from core.domain.payments import Grant, Payment, Recorded, StarsDay
from core.domain.plans import ActivePlan
from core.domain.telegram_keys import key_range
from storage.payments import payment_from_row, payment_values, plan_from_row
from storage.postgres.admin import add_audit
from storage.postgres.bots import Run
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

_STARS_BY_DAY = STARS_BY_DAY.format(
    day="to_char(to_timestamp(created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
).replace("$1 AND created_at < $2", "$1::double precision AND created_at < $2::double precision")
_GRANT_PLAN = GRANT_PLAN.format(greatest="GREATEST").replace(
    "$3 + $4", "$3::double precision + $4::double precision"
)


class PostgresPayments:
    """`PaymentBook` through the store's calls (`call`) and transactions (`write`)."""

    def __init__(self, call: Run, write: Run) -> None:
        self._call = call
        self._write = write

    async def record_payment(self, payment: Payment, grant: Grant | None) -> Recorded:
        async def work(connection: asyncpg.Connection) -> Recorded:
            stored = await connection.fetchrow(INSERT_PAYMENT, *payment_values(payment))
            if stored is None or grant is None:
                return Recorded(stored=stored is not None)
            at, charge = payment.created_at, payment.charge_id
            return Recorded(True, await _grant(connection, payment.person, grant, at, charge))

        return await self._write(work)

    async def grant(self, person: str, grant: Grant, *, at: float) -> ActivePlan:
        return await self._write(lambda c: _grant(c, person, grant, at, ""))

    async def active_plan(self, person: str, now: float) -> ActivePlan | None:
        row = await self._call(lambda c: c.fetchrow(SELECT_PLAN, person, now))
        return None if row is None else plan_from_row(tuple(row))

    async def payment(self, charge_id: str) -> Payment | None:
        row = await self._call(lambda c: c.fetchrow(SELECT_PAYMENT, charge_id))
        return None if row is None else payment_from_row(tuple(row))

    async def refund(
        self, charge_id: str, *, at: float, audit: AuditEntry | None = None
    ) -> Payment | None:
        async def work(connection: asyncpg.Connection) -> Payment | None:
            row = await connection.fetchrow(MARK_REFUNDED, charge_id, at)
            if row is None:
                return None
            refunded = payment_from_row(tuple(row))
            await connection.execute(REVOKE_PLAN, refunded.person)
            if audit is not None:
                await add_audit(connection, audit)
            return refunded

        return await self._write(work)

    async def cancel_renewal(
        self, person: str, plan_id: str, *, at: float | None, audit: AuditEntry | None = None
    ) -> ActivePlan | None:
        async def work(connection: asyncpg.Connection) -> ActivePlan | None:
            if at is None:
                row = await connection.fetchrow(RESUME_RENEWAL, person, plan_id)
            else:
                row = await connection.fetchrow(CANCEL_RENEWAL, person, plan_id, at)
            if audit is not None:
                await add_audit(connection, audit)
            return None if row is None else plan_from_row(tuple(row))

        return await self._write(work)

    async def payments(
        self, *, person: str | None = None, plan_id: str | None = None, limit: int = 50
    ) -> list[Payment]:
        rows = await self._call(lambda c: c.fetch(SELECT_PAYMENTS, person, plan_id, limit))
        return [payment_from_row(tuple(row)) for row in rows]

    async def stars_by_day(
        self, since: float, until: float, *, scope: int | None = None
    ) -> list[StarsDay]:
        keys = None if scope is None else key_range(scope)
        rows = await self._call(lambda c: c.fetch(_STARS_BY_DAY, since, until, keys))
        return [StarsDay(row[0], int(row[1]), int(row[2]), int(row[3])) for row in rows]

    async def active_plans(self, now: float, *, scope: int | None = None) -> int:
        keys = None if scope is None else key_range(scope)
        return int(await self._call(lambda c: c.fetchval(ACTIVE_PLANS, now, keys)))


async def _grant(
    connection: asyncpg.Connection, person: str, grant: Grant, at: float, charge_id: str
) -> ActivePlan:
    row = await connection.fetchrow(
        _GRANT_PLAN, person, grant.plan_id, at, grant.seconds, grant.until, charge_id
    )
    return plan_from_row(tuple(row))
