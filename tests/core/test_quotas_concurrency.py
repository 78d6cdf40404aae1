"""Quotas under concurrency, on both stores: 30 new API sessions for one `userId` sent at
once are answered exactly up to the person's consultation limit and the rest get 429
QUOTA_EXCEEDED without a model call; a client key's token limit is overspent by at most
one call's reservation; on PostgreSQL the same holds over two workers (two runtimes on
one database); one Telegram member asking in 30 groups at once gets exactly the limit's
answers and the quota message elsewhere.

The production runtime runs (tests/api_harness.py) against the fake model server, whose
replies are slowed so every request is in flight at once."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from core.domain.usage import ScopeKind, day_of
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi, api_settings, running_api
from tests.bot_harness import ALICE, group_said, post_in_group, started_bot
from tests.store_contract import StoreKind

if TYPE_CHECKING:
    from app.stores import Store

TOKEN = "quota-token"
CLIENT = "token:" + hashlib.sha256(TOKEN.encode()).hexdigest()[:32]
HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
STARTS = 30
REPLY_TOKENS = 600  # each reply's usage; within LLM_MAX_TOKENS (what a call may spend)
LIMITS = {
    "user_daily_consultation_limit": 2,
    "user_daily_token_limit": 1000,
    "api_daily_token_limit": 5000,
}


def enqueue_replies(model_server: FakeModelServer, count: int) -> None:
    for _ in range(count):
        model_server.enqueue(
            "Answer.",
            usage={"prompt_tokens": 20, "completion_tokens": REPLY_TOKENS - 20},
            delay=0.2,
        )


@contextlib.asynccontextmanager
async def workers(
    kind: StoreKind, database: str, model_server: FakeModelServer, count: int, **limits: Any
) -> AsyncIterator[list[RunningApi]]:
    """`count` API runtimes (workers) on one database of `kind`."""
    where: dict[str, Any] = {"db_path": Path(database)}
    if kind.name == "postgres":
        where = {"database_url": database, "db_path": Path(database + ".unused")}
    settings = api_settings(
        where["db_path"],
        model_server.base_url,
        api_token=TOKEN,
        llm_max_tokens=REPLY_TOKENS,
        api_rate_limit_per_minute=0,
        **{k: v for k, v in where.items() if k != "db_path"},
        **limits,
    )
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(running_api(settings)) for _ in range(count)]


async def start_all(apis: list[RunningApi], body: dict[str, Any]) -> list[tuple[int, Any]]:
    """`STARTS` new sessions sent at once, spread over the workers."""

    async def one(n: int) -> tuple[int, Any]:
        api = apis[n % len(apis)]
        response = await api.client.post(
            "/api/chat", data=json.dumps({**body, "message": f"Question {n}"}), headers=HEADERS
        )
        return response.status, await response.json()

    return await asyncio.gather(*(one(n) for n in range(STARTS)))


async def spent(api: RunningApi, scope: ScopeKind, key: str) -> int:
    return await spent_by(api.store, scope, key)


async def spent_by(store: Store, scope: ScopeKind, key: str) -> int:
    day = day_of(time.time())
    totals = await store.usage_of(scope, key, since_day=day, until_day=day)
    return sum(t.prompt_tokens + t.completion_tokens for t in totals)


def report(name: str, answered: int, tokens: int) -> None:
    """The measured figures, printed for the record (`pytest -s`)."""
    print(f"\n{name}: {answered} of {STARTS} answered, {tokens} tokens")


async def check_person_starts(apis: list[RunningApi], model_server: FakeModelServer) -> None:
    enqueue_replies(model_server, STARTS)
    results = await start_all(apis, {"userId": "u-1"})
    answered = [body for status, body in results if status == 200]
    refused = [body for status, body in results if status != 200]
    tokens = await spent(apis[0], ScopeKind.PERSON, "api:u-1")
    report(f"{len(apis)} worker(s), one userId", len(answered), tokens)
    assert len(answered) == LIMITS["user_daily_consultation_limit"]
    assert {(status, body["code"]) for status, body in results if status != 200} == {
        (429, "QUOTA_EXCEEDED")
    }
    assert len(refused) == STARTS - len(answered)
    assert len(model_server.requests) == len(answered)
    assert tokens == len(answered) * REPLY_TOKENS


@pytest.mark.parametrize("count", [1])
async def test_concurrent_starts_of_one_user_are_answered_up_to_the_limit(
    kind: StoreKind, database: str, model_server: FakeModelServer, count: int
) -> None:
    """30 sessions for one userId at once (2 consultations, 1000 tokens a day): exactly 2
    answered, 28 refused with 429 QUOTA_EXCEEDED and never sent to the model."""
    async with workers(kind, database, model_server, count, **LIMITS) as apis:
        await check_person_starts(apis, model_server)


async def test_concurrent_starts_over_two_postgres_workers_are_answered_up_to_the_limit(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """The same 30 sessions spread over two workers on one PostgreSQL database: still
    exactly 2 answered."""
    from tests.store_contract import STORE_KINDS

    kind = next(k for k in STORE_KINDS if k.name == "postgres")
    database = await kind.new_database(tmp_path)
    try:
        async with workers(kind, database, model_server, 2, **LIMITS) as apis:
            await check_person_starts(apis, model_server)
    finally:
        await kind.drop_database(database)


async def test_concurrent_starts_under_a_consultation_limit_alone_are_counted_to_it(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """With no token limit nothing is held: the starts themselves are counted only below
    the limit, so exactly 2 of 30 are answered and every refusal names the consultation
    limit with the 2 used."""
    enqueue_replies(model_server, STARTS)
    async with workers(kind, database, model_server, 1, user_daily_consultation_limit=2) as apis:
        results = await start_all(apis, {"userId": "u-1"})
        started = await apis[0].store.consultations_started("api:u-1", day_of(time.time()))
    refused = [body for status, body in results if status == 429]
    assert len(refused) == STARTS - 2 and started == 2
    assert {(body["quota"], body["code"]) for body in refused} == {
        ("user_daily_consultations", "QUOTA_EXCEEDED")
    }
    assert len(model_server.requests) == 2


async def test_concurrent_sessions_overspend_a_client_limit_by_at_most_one_call(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """30 sessions without a userId at once against API_DAILY_TOKEN_LIMIT=5000: each call
    reserves its estimated input and its max_tokens first, so the key spends at least the
    limit's worth minus one call and at most one call past it, whatever the concurrency."""
    enqueue_replies(model_server, STARTS)
    async with workers(kind, database, model_server, 1, api_daily_token_limit=5000) as apis:
        results = await start_all(apis, {})
        tokens = await spent(apis[0], ScopeKind.CLIENT, CLIENT)
    answered = sum(1 for status, _ in results if status == 200)
    report("one client key", answered, tokens)
    assert {status for status, _ in results} == {200, 429}
    assert tokens == answered * REPLY_TOKENS
    assert 5000 - REPLY_TOKENS <= tokens < 5000 + REPLY_TOKENS


# -- Telegram --------------------------------------------------------------------------------

GROUPS = [-1_000_100 - n for n in range(STARTS)]
REFUSAL = "You have reached your daily"  # its consultation or its token limit: both apply


async def test_concurrent_starts_of_one_telegram_user_are_answered_up_to_the_limit(
    kind: StoreKind, database: str, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """One member asks the bot in 30 groups at once (2 consultations, 1000 tokens a day):
    exactly 2 groups get an answer; the other 28 get the quota message (the two answers
    under way hold their tokens, so the token limit or the consultation limit is named),
    and the model is called twice."""
    enqueue_replies(model_server, STARTS)
    where: dict[str, Any] = {}
    if kind.name == "postgres":
        where = {"database_url": database}
    db_path = Path(database) if kind.name == "sqlite" else Path(database + ".unused")
    limits = {k: v for k, v in LIMITS.items() if k != "api_daily_token_limit"}
    async with started_bot(
        db_path, bot_api, model_server, llm_max_tokens=REPLY_TOKENS, **where, **limits
    ) as bot:
        for chat in GROUPS:
            await post_in_group(bot, "@consult_bot Which database?", chat=chat)
        said = [await group_said(bot, "", chat=chat) for chat in GROUPS]
        tokens = await spent_by(bot.runtime.store, ScopeKind.PERSON, f"tg:{ALICE}")
    refused = [call for call in said if call.params["text"].startswith(REFUSAL)]
    report("Telegram, one member in 30 groups", STARTS - len(refused), tokens)
    assert len(refused) == STARTS - 2
    assert len(model_server.requests) == 2
    assert tokens == 2 * REPLY_TOKENS
