"""Quotas under concurrency, on both stores: 30 new API sessions for one `userId` sent at
once are answered exactly up to the person's consultation limit and the rest get 429
QUOTA_EXCEEDED without a model call; a client key's token limit is overspent by at most
one call's reservation; on PostgreSQL the same holds over two workers (two runtimes on
one database).

The production runtime runs (tests/api_harness.py) against the fake model server, whose
replies are slowed so every request is in flight at once."""

from __future__ import annotations

import asyncio
import hashlib
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.usage import ScopeKind, day_of
from tests.api_harness import RunningApi, api_settings, running_api
from tests.fakes.model_server import FakeModelServer
from tests.store_contract import StoreKind

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
    day = day_of(time.time())
    totals = await api.store.usage_of(scope, key, since_day=day, until_day=day)
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
