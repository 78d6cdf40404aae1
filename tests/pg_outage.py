"""A PostgreSQL outage for tests: a migrated database of the test's own that refuses every
new connection (`ALLOW_CONNECTIONS false`, SQLSTATE 55000) and has its backends terminated
(57P01), as when an operator takes it away.

Invariants: the outage touches only that database (the run's own database, and every other
test's connections, are never terminated); the database accepts connections again and is
dropped when the fixture ends, however the test ended. Connections whose
`application_name` is `SURVIVOR` are spared: they stand for a worker whose connection the
outage did not reach.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import asyncpg
import pytest_asyncio

from storage.postgres.schema import migrate
from tests.postgres import (
    connect_or_skip,
    database_url_for_tests,
    server_url_for_tests,
    with_database,
    with_settings,
)

SURVIVOR = "outage-survivor"


def with_application_name(url: str, name: str) -> str:
    return with_settings(url, application_name=name)


@dataclass
class Outage:
    """`url` is the database's; `begin()` takes it away, `end()` gives it back."""

    url: str
    name: str
    server: str

    async def begin(self) -> None:
        admin = await asyncpg.connect(self.server, timeout=10)
        try:
            await admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = $1 AND application_name IS DISTINCT FROM $2",
                self.name,
                SURVIVOR,
            )
        finally:
            await admin.close()

    async def end(self) -> None:
        admin = await asyncpg.connect(self.server, timeout=10)
        try:
            await admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')
        finally:
            await admin.close()


@pytest_asyncio.fixture
async def outage() -> AsyncIterator[Outage]:
    """A new migrated database (named after the run's, so a killed run's is cleaned up
    with it) that the test can take away and give back."""
    run_database = urlsplit(database_url_for_tests()).path.lstrip("/")
    server = server_url_for_tests()
    admin = await connect_or_skip(server)
    name = f"{run_database}_outage_{uuid.uuid4().hex[:8]}"
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = with_database(server, name)
        migrating = await asyncpg.connect(url, timeout=10)
        try:
            await migrate(migrating)
        finally:
            await migrating.close()
        taken = Outage(url, name, server)
        try:
            yield taken
        finally:
            await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
