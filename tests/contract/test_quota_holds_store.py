"""Quota holds and limited starts in the store, on every `tests.store_contract.STORE_KINDS`
(SQLite and PostgreSQL): a start counted only below its limit (nothing stored at it), a
hold read and stored in one step with the standing it adds to, live holds counted next to
the charges and expired ones not; and, with two stores (workers) on one database writing
at once, exactly the limit's starts and holds admitted."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from core.domain.consultation import Usage
from core.domain.quotas import Standing, StartRefused, TokenHold
from core.domain.usage import CallKind, Charge
from tests.store_contract import Rows, StoreKind, make

if TYPE_CHECKING:
    from app.stores import Store

DAY = "2025-11-27"
MONTH = "2025-11-01"
AT = 1_764_201_600.0 + 3600  # 2025-11-27 01:00 UTC
INJECTION = "'); DROP TABLE quota_holds; --"


def hold(name: str, tokens: int, *, person: str | None = "tg:1", client: str | None = None,
         day: str = DAY, expires_at: float = AT + 900) -> TokenHold:  # fmt: skip
    return TokenHold(name, person, client, day, tokens, expires_at)


def charge(tokens: int, *, person: str | None = "tg:1", client: str | None = None,
           day: str = DAY) -> Charge:  # fmt: skip
    usage = Usage(tokens - 1, 1)
    return Charge(day, "chat:1", "m", CallKind.ROUND, usage, 0.0, True, person, client)


def always(_: Standing) -> bool:
    return True


async def test_a_start_is_counted_only_below_its_limit(store: Store, rows: Rows) -> None:
    """With a limit of 2 the third start raises `StartRefused` naming the 2 started, and
    stores nothing (no consultation, no count); without a limit it is counted."""
    await store.create(make("chat:1", at=AT), starter="tg:1", start_limit=2)
    await store.create(make("chat:2", at=AT), starter="tg:1", start_limit=2)
    with pytest.raises(StartRefused) as refused:
        await store.create(make("chat:3", at=AT), starter="tg:1", start_limit=2)
    assert refused.value.started == 2
    assert await store.load_active("chat:3") is None
    assert await rows("consultations") == 2
    assert await store.consultations_started("tg:1", DAY) == 2
    await store.create(make("chat:3", at=AT), starter="tg:1")
    assert await store.consultations_started("tg:1", DAY) == 3
    await store.create(make("chat:4", at=AT), starter=INJECTION, start_limit=1)
    assert await store.consultations_started(INJECTION, DAY) == 1


async def test_a_hold_is_stored_with_the_standing_it_was_admitted_on(
    store: Store, rows: Rows
) -> None:
    """The standing counts the charges and the live holds of the person (day, month) and
    of the client key (day); a hold refused by `admit` is not stored; an expired hold, a
    resized one and a released one count as they now stand."""
    await store.add_usage([charge(100, client="key:a"), charge(50, day="2025-11-02")])
    await store.create(make("chat:1", at=AT), starter="tg:1")
    standing, held = await store.hold_tokens(
        hold("h1", 300, client="key:a"), month=MONTH, now=AT, admit=always
    )
    assert held and standing == Standing(100, 150, 1, 100)
    standing, held = await store.hold_tokens(
        hold("h2", 10, client="key:a"), month=MONTH, now=AT, admit=lambda s: False
    )
    assert not held and standing == Standing(400, 450, 1, 400)
    assert await rows("quota_holds") == 1
    await store.resize_hold("h1", 20, AT + 900)
    await store.hold_tokens(hold("old", 1000, expires_at=AT - 1), month=MONTH, now=AT - 2,
                            admit=always)  # fmt: skip
    seen: list[Standing] = []

    def record(standing: Standing) -> bool:
        seen.append(standing)
        return True

    await store.hold_tokens(hold("h3", 5, person=None, client="key:a"), month=MONTH, now=AT,
                            admit=record)  # fmt: skip
    assert seen == [Standing(0, 0, 0, 120)]  # the expired hold is not counted
    await store.release_hold("h1")
    await store.release_hold("h1")  # gone: nothing
    await store.resize_hold("h1", 500, AT + 900)  # gone: nothing
    standing, _ = await store.hold_tokens(
        hold("h4", 1, client="key:a"), month=MONTH, now=AT, admit=always
    )
    assert standing == Standing(100, 150, 1, 105)
    await store.hold_tokens(hold("h5", 1, person=INJECTION), month=MONTH, now=AT, admit=always)
    assert await rows("quota_holds", person=INJECTION) == 1


async def test_two_workers_admit_exactly_the_limits_worth_at_once(
    kind: StoreKind, database: str
) -> None:
    """Two stores (workers) taking 20 holds of 300 tokens for one person at once, each
    admitted while the person's tokens are under 1000, and 20 starts limited to 5: exactly
    4 holds (0, 300, 600, 900 before each) and 5 starts get through."""
    first, second = await kind.open(database), await kind.open(database)
    try:

        def under(standing: Standing) -> bool:
            return standing.tokens_today < 1000

        async def take(n: int) -> bool:
            store = first if n % 2 else second
            _, held = await store.hold_tokens(hold(f"h{n}", 300), month=MONTH, now=AT, admit=under)
            return held

        async def start(n: int) -> bool:
            store = first if n % 2 else second
            try:
                await store.create(make(f"chat:{n}", at=AT), starter="tg:1", start_limit=5)
            except StartRefused:
                return False
            return True

        held = await asyncio.gather(*(take(n) for n in range(20)))
        started = await asyncio.gather(*(start(n) for n in range(20)))
        assert sum(held) == 4 and sum(started) == 5
        assert await first.consultations_started("tg:1", DAY) == 5
    finally:
        await first.close()
        await second.close()
