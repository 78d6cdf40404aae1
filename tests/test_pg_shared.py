"""State shared by worker processes on PostgreSQL: two pools on one database stand for two
workers (rate limits, undelivered replies, one runner of a periodic job)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace

import asyncpg
import pytest
import pytest_asyncio

from app.serve_bot import shared_state
from bot.config import BotConfig
from storage.postgres.coordination.locks import try_exclusive
from storage.postgres.coordination.pool import open_shared_pool
from storage.postgres.coordination.rate_limits import PostgresRateLimits
from storage.postgres.coordination.undelivered import PostgresUndelivered
from storage.postgres.store import PostgresStore
from tests.fakes.bot_api import TOKEN
from tests.postgres import postgres_url  # noqa: F401  (fixture)

Pools = tuple[asyncpg.Pool, asyncpg.Pool]


@pytest_asyncio.fixture
async def pools(postgres_url: str) -> AsyncIterator[Pools]:  # noqa: F811
    store = await PostgresStore.open(postgres_url)  # migrates
    first = await open_shared_pool(postgres_url)
    second = await open_shared_pool(postgres_url)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()
        await store.close()


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_the_rate_limit_is_shared_by_every_worker(pools: Pools) -> None:
    """Three messages a minute: whichever worker a user reaches, the fourth waits, and one
    token comes back every 20 seconds."""
    clock = Clock()
    a = PostgresRateLimits(pools[0], 3, clock=clock)
    b = PostgresRateLimits(pools[1], 3, clock=clock)
    assert [await a.check(7), await b.check(7), await a.check(7)] == [0.0, 0.0, 0.0]
    assert await b.check(7) == pytest.approx(20.0)
    assert await a.check(8) == 0.0  # another user has a bucket of their own
    clock.now += 5
    assert await a.check(7) == pytest.approx(15.0)  # a refusal takes nothing
    clock.now += 15
    assert await b.check(7) == 0.0
    assert await a.check(7) == pytest.approx(20.0)


async def test_button_presses_have_a_budget_of_their_own_shared_by_every_worker(
    pools: Pools,
) -> None:
    """Presses and messages are counted apart: a user out of presses on one worker is out
    on the other too, yet may still write; idle press buckets are forgotten too."""
    clock = Clock()
    presses = [PostgresRateLimits(pool, 2, table="press_limits", clock=clock) for pool in pools]
    messages = PostgresRateLimits(pools[0], 1, clock=clock)
    assert [await presses[0].check(5), await presses[1].check(5)] == [0.0, 0.0]
    assert await presses[1].check(5) == pytest.approx(30.0)
    assert await presses[0].check(5) == pytest.approx(30.0)
    assert await messages.check(5) == 0.0
    assert await pools[0].fetchval("SELECT count(*) FROM press_limits") == 1
    clock.now += 61
    assert await presses[0].forget_idle() == 1
    with pytest.raises(ValueError, match="not a rate limit table"):
        PostgresRateLimits(pools[0], 1, table="users; DROP TABLE x")  # type: ignore[arg-type]


async def test_workers_on_postgresql_are_given_the_shared_press_budget(pools: Pools) -> None:
    """`shared_state` gives the bot presses counted in `press_limits`, at the configured
    rate, apart from the message limit."""
    config = BotConfig(token=TOKEN, user_rate_limit_per_minute=5, button_presses_per_minute=1)
    state = shared_state(SimpleNamespace(shared_pool=pools[0]), config)  # type: ignore[arg-type]
    assert state.press_limits is not None and state.rate_limits is not None
    assert await state.press_limits.check(77) == 0.0
    assert await state.press_limits.check(77) > 0
    assert await state.rate_limits.check(77) == 0.0
    assert await pools[1].fetchval("SELECT count(*) FROM press_limits WHERE user_id = 77") == 1


async def test_concurrent_checks_never_take_more_tokens_than_there_are(pools: Pools) -> None:
    """Forty checks at once from two workers: exactly the five tokens are taken."""
    clock = Clock()
    limits = [PostgresRateLimits(pool, 5, clock=clock) for pool in pools]
    waits = await asyncio.gather(*(limits[i % 2].check(1) for i in range(40)))
    assert sum(1 for wait in waits if wait == 0.0) == 5


async def test_a_limited_user_is_warned_once_a_minute_across_workers(pools: Pools) -> None:
    clock = Clock()
    a = PostgresRateLimits(pools[0], 1, clock=clock)
    b = PostgresRateLimits(pools[1], 1, clock=clock)
    assert await a.check(3) == 0.0 and await b.check(3) > 0
    assert await b.should_warn(3)
    assert not await a.should_warn(3)
    clock.now += 59
    assert not await b.should_warn(3)
    clock.now += 1
    assert await a.should_warn(3)


async def test_unlimited_asks_nothing_and_idle_users_are_forgotten(pools: Pools) -> None:
    clock = Clock()
    assert await PostgresRateLimits(pools[0], 0, clock=clock).check(1) == 0.0
    limits = PostgresRateLimits(pools[0], 2, clock=clock)
    for user in range(10):
        await limits.check(user)
    assert await pools[0].fetchval("SELECT count(*) FROM rate_limits") == 10
    clock.now += 30
    await limits.check(99)
    clock.now += 30
    assert await limits.forget_idle() == 10  # user 99 checked 30 s ago is kept
    assert await pools[0].fetchval("SELECT count(*) FROM rate_limits") == 1


async def test_an_undelivered_reply_is_taken_by_exactly_one_worker(pools: Pools) -> None:
    """Stored by one worker, popped by another; a second pop finds nothing; topics and
    chats are separate; a later reply for the same conversation replaces the first."""
    clock = Clock()
    a = PostgresUndelivered(pools[0], clock=clock)
    b = PostgresUndelivered(pools[1], clock=clock)
    await a.put(5, None, '{"text": "one"}', "en")
    await a.put(5, None, '{"text": "two"}', "ru")
    await a.put(5, 9, '{"text": "topic"}', "en")
    await a.put(6, None, '{"text": "other"}', "en")
    results = await asyncio.gather(b.pop(5, None), a.pop(5, None))
    assert results.count(None) == 1 and ('{"text": "two"}', "ru") in results
    assert await b.pop(5, 9) == ('{"text": "topic"}', "en")
    assert await b.pop(5, 9) is None


async def test_looks_made_together_each_take_their_own_conversation(pools: Pools) -> None:
    """Many turns look at once (one shared statement): each gets its own conversation's
    reply, a conversation asked twice at once gives it once, the others get None."""
    undelivered = PostgresUndelivered(pools[0], clock=Clock())
    for chat in range(0, 20, 2):
        await undelivered.put(chat, None, f'{{"chat": {chat}}}', "en")
    await undelivered.put(4, 7, '{"topic": 7}', "ru")
    asked = [(chat, None) for chat in range(20)] + [(4, 7), (4, None)]
    results = await asyncio.gather(*(undelivered.pop(chat, topic) for chat, topic in asked))
    for (chat, _), result in zip(asked[:20], results[:20], strict=True):
        assert result == ((f'{{"chat": {chat}}}', "en") if chat % 2 == 0 else None)
    assert results[20] == ('{"topic": 7}', "ru")
    assert results[21] is None  # (4, None) was asked twice: taken by the first look only
    assert await pools[0].fetchval("SELECT count(*) FROM undelivered") == 0


async def test_undelivered_replies_older_than_a_day_are_dropped(pools: Pools) -> None:
    clock = Clock()
    undelivered = PostgresUndelivered(pools[0], clock=clock)
    await undelivered.put(1, None, "{}", "en")
    await undelivered.put(2, None, "{}", "en")
    clock.now += 24 * 3600
    assert await undelivered.pop(1, None) is None
    assert await undelivered.forget_old() == 1
    assert await pools[0].fetchval("SELECT count(*) FROM undelivered") == 0


async def test_one_runner_at_a_time_the_other_skips(pools: Pools) -> None:
    """While one worker runs the job, another gets False at once; after, it gets True."""
    async with try_exclusive(pools[0], "cleanup") as first:
        async with try_exclusive(pools[1], "cleanup") as second:
            assert first and not second
        async with try_exclusive(pools[1], "other job") as other:
            assert other
    async with try_exclusive(pools[1], "cleanup") as later:
        assert later


async def test_the_job_lock_is_released_when_the_job_fails(pools: Pools) -> None:
    async def failing_job() -> None:
        async with try_exclusive(pools[0], "cleanup") as mine:
            assert mine
            raise RuntimeError("cleanup failed")

    with pytest.raises(RuntimeError):
        await failing_job()
    async with try_exclusive(pools[1], "cleanup") as again:
        assert again
