"""The implementations of the bot's shared-state ports that the port contract suites run
against: each port kept in this process's memory (one worker) and on PostgreSQL (every
worker shares it).

Each `Backend` builds a port's implementation with an injected clock (`Clock`, moved by
hand: no test sleeps); `port_fixture` gives each in turn. The suites
(tests/bot/test_rate_limits_contract.py, tests/bot/test_undelivered_contract.py,
tests/bot/test_flood_waits_contract.py) run the same tests over every backend, so both
implementations give a setting one meaning; what only PostgreSQL has (several workers at
once, its cleanups) is tested in tests/storage/test_pg_shared.py and tests/bot/test_flood_shared.py,
what only memory has in tests/bot/test_bot_units.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from bot.transport.flood import FloodWaits, MemoryFloodWaits
from bot.transport.undelivered import MemoryUndelivered, StoredUndelivered, UndeliveredReplies
from bot.updates.access import RateLimiter, UserRateLimits
from storage.postgres.cluster.flood_waits import PostgresFloodWaits
from storage.postgres.cluster.pool import open_shared_pool
from storage.postgres.cluster.rate_limits import RATE_TABLES, PostgresRateLimits, RateTable
from storage.postgres.cluster.undelivered import PostgresUndelivered
from tests.postgres import fresh_schema


class Clock:
    """A clock the test moves by hand (`now += seconds`)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class Backend:
    """Where a port keeps its state: this process (`pool` None) or PostgreSQL."""

    name: str  # the pytest id of the parametrised tests
    pool: asyncpg.Pool | None = None
    table: RateTable = "bot_rate_limits"  # which budget a rate limit counts in on PostgreSQL

    def rate_limits(self, per_minute: int, clock: Clock) -> UserRateLimits:
        if self.pool is None:
            return RateLimiter(per_minute, clock=clock)
        return PostgresRateLimits(self.pool, per_minute, table=self.table, clock=clock)

    def undelivered(self, clock: Clock) -> UndeliveredReplies:
        if self.pool is None:
            return MemoryUndelivered(clock=clock)
        return StoredUndelivered(PostgresUndelivered(self.pool, clock=clock))

    def flood_waits(self, clock: Clock) -> FloodWaits:
        if self.pool is None:
            return MemoryFloodWaits(clock)
        return PostgresFloodWaits(self.pool, clock=clock)


BACKENDS = ["memory", "postgres"]
"""The parameters of `backend`."""

RATE_BACKENDS = ["memory", *(f"postgres:{table}" for table in RATE_TABLES)]
"""The parameters of `backend` for the rate limits: each PostgreSQL budget (messages,
button presses) on its own table."""


def port_fixture(names: list[str]) -> Any:
    """A fixture giving each backend of `names` in turn (the implementation under test):
    `port = port_fixture(BACKENDS)` in a suite."""

    @pytest.fixture(params=names)
    async def port(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
        async with backend(request.param) as chosen:
            yield chosen

    return port


@asynccontextmanager
async def backend(name: str) -> AsyncIterator[Backend]:
    """The backend `name` (one of `BACKENDS` or `RATE_BACKENDS`); on PostgreSQL a migrated
    pool on a new schema of its own, dropped afterwards."""
    if name == "memory":
        yield Backend(name)
        return
    table: RateTable = "bot_press_limits" if name.endswith("press_limits") else "bot_rate_limits"
    async with shared_pool() as pool:
        yield Backend(name, pool, table)


@asynccontextmanager
async def shared_pool() -> AsyncIterator[asyncpg.Pool]:
    """A pool as a worker has for its shared state (migrated), on a new, empty schema."""
    async with fresh_schema() as url:
        pool = await open_shared_pool(url)
        try:
            yield pool
        finally:
            await pool.close()
