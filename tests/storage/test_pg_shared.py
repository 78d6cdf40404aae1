"""State shared by worker processes on PostgreSQL: two pools on one database stand for two
workers (rate limits, undelivered replies, one runner of a periodic job), and what the
cleanup and the upgrades of these tables do. What each port does in one worker is in the
port contract suites (tests/port_contract.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace

import asyncpg
import pytest
import pytest_asyncio

from app.bot_edge import shared_state
from bot.transport.config import BotConfig
from fakes.bot_api import TOKEN
from storage.postgres.cluster import schema as cluster_schema
from storage.postgres.cluster.locks import try_exclusive
from storage.postgres.cluster.pool import open_shared_pool
from storage.postgres.cluster.rate_limits import (
    LEGACY_RATE_TABLES,
    RATE_TABLES,
    PostgresRateLimits,
    forget_idle,
)
from storage.postgres.cluster.undelivered import PostgresUndelivered
from storage.postgres.store import PostgresStore
from tests.port_contract import Clock
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


async def test_the_rate_limit_is_shared_by_every_worker(pools: Pools) -> None:
    """Three messages a minute: whichever worker a user reaches, the fourth of any minute
    is refused, and the window has room again a minute after the first."""
    clock = Clock()
    a = PostgresRateLimits(pools[0], 3, clock=clock)
    b = PostgresRateLimits(pools[1], 3, clock=clock)
    assert [await a.check(7), await b.check(7), await a.check(7)] == [0.0, 0.0, 0.0]
    assert await b.check(7) == pytest.approx(60.0)
    assert await a.check(8) == 0.0  # another user has a window of their own
    clock.now += 20
    assert await a.check(7) == pytest.approx(40.0)
    clock.now += 40
    assert [await b.check(7), await a.check(7), await b.check(7)] == [0.0, 0.0, 0.0]
    assert await a.check(7) == pytest.approx(60.0)


async def test_button_presses_have_a_budget_of_their_own_shared_by_every_worker(
    pools: Pools,
) -> None:
    """Presses and messages are counted apart: a user out of presses on one worker is out
    on the other too, yet may still write; idle press windows are forgotten too."""
    clock = Clock()
    presses = [PostgresRateLimits(pool, 2, table="bot_press_limits", clock=clock) for pool in pools]
    messages = PostgresRateLimits(pools[0], 1, clock=clock)
    assert [await presses[0].check(5), await presses[1].check(5)] == [0.0, 0.0]
    assert await presses[1].check(5) == pytest.approx(60.0)
    assert await presses[0].check(5) == pytest.approx(60.0)
    assert await messages.check(5) == 0.0
    assert await pools[0].fetchval("SELECT count(*) FROM bot_press_limits") == 1
    clock.now += 61
    assert await presses[0].forget_idle() == 1
    with pytest.raises(ValueError, match="not a rate limit table"):
        PostgresRateLimits(pools[0], 1, table="users; DROP TABLE x")  # type: ignore[arg-type]


async def test_workers_on_postgresql_are_given_the_shared_press_budget(pools: Pools) -> None:
    """`shared_state` gives the bot presses counted in `bot_press_limits`, at the configured
    rate, apart from the message limit."""
    config = BotConfig(token=TOKEN, user_rate_limit_per_minute=5, button_presses_per_minute=1)
    state = shared_state(SimpleNamespace(shared_pool=pools[0], store=None), config)  # type: ignore[arg-type]
    assert state.press_limits is not None and state.rate_limits is not None
    assert await state.press_limits.check(77) == 0.0
    assert await state.press_limits.check(77) > 0
    assert await state.rate_limits.check(77) == 0.0
    count = "SELECT count(*) FROM bot_press_limits WHERE bot = 0 AND user_id = 77"
    assert await pools[1].fetchval(count) == 1


async def test_workers_checking_one_user_at_once_never_let_more_than_the_limit_through(
    pools: Pools,
) -> None:
    """Forty checks at once from two workers (ten connections), minute after minute:
    exactly five pass in each minute, none half a minute later, and the user's row never
    holds more than five times."""
    clock = Clock()
    limits = [PostgresRateLimits(pool, 5, clock=clock) for pool in pools]
    for _ in range(4):
        for expected in (5, 0):
            waits = await asyncio.gather(*(limits[i % 2].check(1) for i in range(40)))
            assert waits.count(0.0) == expected
            clock.now += 30
    held = await pools[0].fetchval(
        "SELECT cardinality(hits) FROM bot_rate_limits WHERE user_id = 1"
    )
    assert held == 5


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


async def test_users_idle_for_a_window_are_forgotten(pools: Pools) -> None:
    """The rows of users with no event and no warning in the last minute are deleted;
    a user counted or warned within it is kept."""
    clock = Clock()
    limits = PostgresRateLimits(pools[0], 2, clock=clock)
    for user in range(10):
        await limits.check(user)
    assert await pools[0].fetchval("SELECT count(*) FROM bot_rate_limits") == 10
    clock.now += 30
    await limits.check(99)
    await limits.should_warn(98)
    clock.now += 30
    assert await limits.forget_idle() == 10  # users 98 and 99, seen 30 s ago, are kept
    assert await pools[0].fetchval("SELECT count(*) FROM bot_rate_limits") == 2
    clock.now += 30
    assert await limits.forget_idle() == 2


async def test_limits_kept_as_token_buckets_are_harmless_after_the_upgrade(
    postgres_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A database whose limits were token buckets (an empty one, a warned user): after the
    upgrade each user starts with an empty window and a warned user stays warned for the
    rest of the minute, in both budgets."""
    clock = Clock()
    full = list(cluster_schema.MIGRATIONS)
    names = [name for name, _ in full]
    before = full[: names.index("c001_rate_windows")]
    monkeypatch.setattr(cluster_schema, "MIGRATIONS", before)
    connection = await asyncpg.connect(postgres_url)
    try:
        await cluster_schema.migrate(connection)
        for table in LEGACY_RATE_TABLES:
            await connection.execute(
                f"INSERT INTO {table} (user_id, tokens, updated_at, warned_at)"
                " VALUES (7, 0, $1, $1), (8, 0.5, $1, NULL)",
                clock.now,
            )
    finally:
        await connection.close()
    monkeypatch.setattr(cluster_schema, "MIGRATIONS", full)

    pool = await open_shared_pool(postgres_url)  # applies the rest
    try:
        for table in RATE_TABLES:
            limits = PostgresRateLimits(pool, 2, table=table, clock=clock)
            for user in (7, 8):
                assert [await limits.check(user) for _ in range(3)] == [0.0, 0.0, 60.0]
            assert not await limits.should_warn(7)
            assert await limits.should_warn(8)
    finally:
        await pool.close()


# The previous release's statements (before c004: a window per user, every bot's messages
# in one), as its workers still send them while a rolling restart replaces them: $1 user,
# $2 limit, $3 now, $4 window; the warning's $1 user, $2 now, $3 window.
PREVIOUS_COUNT = """
WITH counted AS (
    INSERT INTO rate_limits AS r (user_id, hits) VALUES ($1::bigint, ARRAY[$3::float8])
    ON CONFLICT (user_id) DO UPDATE
        SET hits = ARRAY(SELECT h FROM unnest(r.hits || $3::float8) AS h
                         WHERE h > $3 - $4 ORDER BY h)
        WHERE (SELECT count(*) FROM unnest(r.hits) AS h WHERE h > $3 - $4) < $2
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM counted) AS allowed
"""
PREVIOUS_WARN = """
INSERT INTO rate_limits AS r (user_id, warned_at) VALUES ($1::bigint, $2::float8)
ON CONFLICT (user_id) DO UPDATE SET warned_at = $2::float8
    WHERE r.warned_at IS NULL OR r.warned_at <= $2::float8 - $3::float8
RETURNING 1
"""


async def test_workers_of_the_previous_release_keep_working_through_a_rolling_restart(
    pools: Pools,
) -> None:
    """After c004 a worker still running the previous release (one window per user, in
    `rate_limits`) keeps counting and warning there, limited as before, while the new
    workers count per bot in `bot_rate_limits`: each release on its own, none failing."""
    clock = Clock()
    new = PostgresRateLimits(pools[0], 2, clock=clock)
    assert [await new.check(7), await new.check(7)] == [0.0, 0.0]
    async with pools[1].acquire() as old:
        passed = [await old.fetchval(PREVIOUS_COUNT, 7, 2, clock.now, 60.0) for _ in range(3)]
        assert passed == [True, True, False]
        assert await old.fetchval(PREVIOUS_WARN, 7, clock.now, 60.0) == 1
        assert await old.fetchval(PREVIOUS_WARN, 7, clock.now, 60.0) is None
    assert await new.check(7) == pytest.approx(60.0)
    assert await new.should_warn(7)
    clock.now += 61  # the old worker stopped: the cleanup empties its table too
    assert await forget_idle(pools[0], "rate_limits", clock.now) == 1
    assert await pools[0].fetchval("SELECT count(*) FROM rate_limits") == 0
    with pytest.raises(ValueError, match="not a rate limit table"):
        await forget_idle(pools[0], "consultations", clock.now)


async def test_the_upgrade_keeps_every_users_window_as_the_deployments_bots(
    postgres_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user at the limit before c004 is still at it afterwards in the deployment's bot
    (scope 0), in both budgets, and a warned one stays warned; another bot starts empty."""
    clock = Clock()
    full = list(cluster_schema.MIGRATIONS)
    names = [name for name, _ in full]
    monkeypatch.setattr(cluster_schema, "MIGRATIONS", full[: names.index("c004_bot_rate_limits")])
    connection = await asyncpg.connect(postgres_url)
    try:
        await cluster_schema.migrate(connection)
        for table in LEGACY_RATE_TABLES:
            await connection.execute(
                f"INSERT INTO {table} (user_id, hits, warned_at) VALUES (7, $1, $2)",
                [clock.now - 10, clock.now - 5],
                clock.now - 5,
            )
    finally:
        await connection.close()
    monkeypatch.setattr(cluster_schema, "MIGRATIONS", full)

    pool = await open_shared_pool(postgres_url)  # applies c004
    try:
        for table in RATE_TABLES:
            main = PostgresRateLimits(pool, 2, table=table, clock=clock)
            other = PostgresRateLimits(pool, 2, table=table, bot=3, clock=clock)
            assert await main.check(7) == pytest.approx(50.0)
            assert not await main.should_warn(7)
            assert [await other.check(7), await other.check(7)] == [0.0, 0.0]
            assert await other.should_warn(7)
    finally:
        await pool.close()


async def test_a_user_at_the_limit_in_one_bot_keeps_the_budget_of_another(pools: Pools) -> None:
    """Each bot's limits are its own (`shared_state` for two scopes): the same user id out
    of messages and presses in one bot still has both in the other, on any worker, and is
    warned in each once."""
    first = BotConfig(token=TOKEN, user_rate_limit_per_minute=1, button_presses_per_minute=1)
    second = BotConfig(
        token="999:OTHER", user_rate_limit_per_minute=1, button_presses_per_minute=1, scope=2
    )
    a = shared_state(SimpleNamespace(shared_pool=pools[0], store=None), first)  # type: ignore[arg-type]
    b = shared_state(SimpleNamespace(shared_pool=pools[1], store=None), second)  # type: ignore[arg-type]
    assert a.rate_limits and a.press_limits and b.rate_limits and b.press_limits
    assert [await a.rate_limits.check(5), await a.rate_limits.check(5)][1] > 0
    assert [await a.press_limits.check(5), await a.press_limits.check(5)][1] > 0
    assert await b.rate_limits.check(5) == 0.0
    assert await b.press_limits.check(5) == 0.0
    assert await b.rate_limits.check(5) > 0
    assert await a.rate_limits.should_warn(5) and await b.rate_limits.should_warn(5)
    rows = await pools[0].fetch("SELECT bot, user_id FROM bot_rate_limits ORDER BY bot")
    assert [tuple(r) for r in rows] == [(0, 5), (2, 5)]


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
