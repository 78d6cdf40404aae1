"""Quotas in the store, on every `tests.store_contract.STORE_KINDS` (SQLite and PostgreSQL):
consultations started counted with their creation, overrides kept per person; and, on
PostgreSQL, two services (two workers) on one database spending one person's tokens at
once go past the daily limit by no more than one reply."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from core.domain.asking import UserMessage
from core.domain.errors import ActiveConsultationExists
from core.domain.quotas import QuotaConfig, QuotaExceeded, QuotaOverride
from core.domain.usage import Payer, ScopeKind, day_of
from core.llm.llm import OpenAICompleter
from fakes.model_server import FakeModelServer
from tests.service_harness import make_service
from tests.store_contract import STORE_KINDS, Rows, StoreKind, make

if TYPE_CHECKING:
    from app.stores import Store

INJECTION = "'); DROP TABLE quota_overrides; --"


async def test_a_start_is_counted_with_its_consultation_by_utc_day(store: Store) -> None:
    """`create` with a starter counts one start on the consultation's UTC day; without one
    nothing; a second ACTIVE consultation refused counts nothing."""
    day = day_of(1000.0)
    await store.create(make("chat:1", at=1000.0), starter="tg:1")
    await store.create(make("chat:2", at=1000.0), starter="tg:1")
    await store.create(make("chat:3", at=1000.0))
    with pytest.raises(ActiveConsultationExists):
        await store.create(make("chat:1", at=1000.0), starter="tg:1")
    await store.create(make("chat:4", at=1000.0 + 86400), starter="tg:1")
    assert await store.consultations_started("tg:1", day) == 2
    assert await store.consultations_started("tg:1", day_of(1000.0 + 86400)) == 1
    assert await store.consultations_started("tg:2", day) == 0
    assert await store.consultations_started(INJECTION, day) == 0


async def test_starts_are_kept_when_the_chat_is_forgotten(store: Store) -> None:
    """Deleting a chat's consultations (/forget) does not give its starts back."""
    await store.create(make("chat:1", at=1000.0), starter="tg:1")
    assert await store.forget_chat("chat:1") == 1
    assert await store.consultations_started("tg:1", day_of(1000.0)) == 1


async def test_overrides_are_set_replaced_and_removed_per_person(store: Store, rows: Rows) -> None:
    """An override is kept per person (a number, or None for exempt), replaced by the next,
    removed by delete (True once); another person's is untouched; hostile text is data."""
    assert await store.load_quota_override("tg:1") is None
    await store.save_quota_override(QuotaOverride("tg:1", 500), at=1.0)
    await store.save_quota_override(QuotaOverride(INJECTION, None), at=1.0)
    assert await store.load_quota_override("tg:1") == QuotaOverride("tg:1", 500)
    await store.save_quota_override(QuotaOverride("tg:1", None), at=2.0)
    assert await store.load_quota_override("tg:1") == QuotaOverride("tg:1", None)
    await store.save_quota_override(QuotaOverride("tg:1", 1_000_000_000), at=3.0)
    assert await store.load_quota_override("tg:1") == QuotaOverride("tg:1", 1_000_000_000)
    assert await rows("quota_overrides") == 2
    assert await store.delete_quota_override("tg:1")
    assert not await store.delete_quota_override("tg:1")
    assert await store.load_quota_override("tg:1") is None
    assert await store.load_quota_override(INJECTION) == QuotaOverride(INJECTION, None)


async def test_two_workers_starting_at_once_count_every_start(
    kind: StoreKind, database: str
) -> None:
    """Starts written by two stores (workers) at once are all counted."""
    first, second = await kind.open(database), await kind.open(database)
    try:
        await asyncio.gather(
            *(
                (first if n % 2 else second).create(make(f"chat:{n}", at=1000.0), starter="tg:1")
                for n in range(20)
            )
        )
        assert await first.consultations_started("tg:1", day_of(1000.0)) == 20
    finally:
        await first.close()
        await second.close()


# -- several workers on PostgreSQL ------------------------------------------------------------

POSTGRES = next(kind for kind in STORE_KINDS if kind.name == "postgres")
CHATS_PER_WORKER = 3
TOKENS_PER_REPLY = 100
LIMIT = 450


@contextlib.asynccontextmanager
async def postgres_database(tmp_path: Path) -> AsyncIterator[str]:
    address = await POSTGRES.new_database(tmp_path)
    try:
        yield address
    finally:
        await POSTGRES.drop_database(address)


async def test_two_workers_overshoot_a_daily_limit_by_at_most_one_reply(
    tmp_path: Path, completer: OpenAICompleter, model_server: FakeModelServer
) -> None:
    """Two services, each with its own store on one PostgreSQL database, answer one
    person in three chats each, all at once, until each chat is refused. Each turn is
    admitted with its call's reservation held (far above the limit), so no other turn of
    the person is admitted while one runs: the person ends under LIMIT + TOKENS_PER_REPLY
    (six chats in flight at once used to end up to six replies past it), and every chat
    is refused in the end. Each call is slowed so calls really overlap."""
    for _ in range(60):
        model_server.enqueue(
            "Answer.",
            usage={"prompt_tokens": TOKENS_PER_REPLY - 1, "completion_tokens": 1},
            delay=0.02,
        )
    payer = Payer(person="tg:7")
    quotas = QuotaConfig(user_daily_tokens=LIMIT)
    async with postgres_database(tmp_path) as address:
        stores = [await POSTGRES.open(address), await POSTGRES.open(address)]
        try:
            workers = [
                make_service(s, completer, quotas=quotas, default_max_rounds=1) for s in stores
            ]

            async def use(worker_index: int, chat: str) -> int:
                """Ask in `chat` until refused; how many answers it got."""
                worker = workers[worker_index]
                for answered in range(20):
                    try:
                        await worker.turns.ask(
                            UserMessage(chat, f"Question {answered}", payer=payer)
                        )
                    except QuotaExceeded:
                        return answered
                raise AssertionError(f"{chat} was never refused")

            chats = [
                (w, f"tg:{100 + w * 10 + c}") for w in range(2) for c in range(CHATS_PER_WORKER)
            ]
            answered = await asyncio.gather(*(use(w, chat) for w, chat in chats))
            day = day_of(time.time())
            totals = await stores[0].usage_of(
                ScopeKind.PERSON, "tg:7", since_day=day, until_day=day
            )
        finally:
            for opened in stores:
                await opened.close()
    spent = sum(t.prompt_tokens + t.completion_tokens for t in totals)
    assert spent == sum(answered) * TOKENS_PER_REPLY
    assert LIMIT <= spent < LIMIT + TOKENS_PER_REPLY
