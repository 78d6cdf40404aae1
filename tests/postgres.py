"""PostgreSQL for tests: a database of this run's own, and a fresh schema in it per test.

Each test run (each pytest process) creates its own database on the server at
TEST_DATABASE_URL the first time a test needs PostgreSQL and drops it when the run
ends, so two runs on one machine never share tables or advisory locks (which are
database-wide) and never wait on each other. A run killed before its end leaves its
database behind; the next run drops those older than `STALE_AFTER_SECONDS` (their
names carry their creation time).

Where PostgreSQL cannot be reached the tests that need it are skipped (every connection
a test makes goes through `connect_or_skip` or a fixture that does), and the run's
summary counts them in one line (tests/postgres_report.py); except when REQUIRE_POSTGRES
is set (CI sets it): then they fail, so a green CI run always means they ran.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit, urlunsplit

import asyncpg
import pytest
import pytest_asyncio

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
RUN_DATABASE_PREFIX = "consult_test_"
STALE_AFTER_SECONDS = 6 * 3600
# How every skip for an unreachable server begins (tests/postgres_report.py counts them).
UNREACHABLE = "PostgreSQL is not reachable"

T = TypeVar("T")

_lock = threading.Lock()
_run_database: str | None = None


def server_url_for_tests() -> str:
    """The URL of the database runs connect to in order to create their own."""
    return os.environ.get("TEST_DATABASE_URL", DEFAULT_URL)


def database_url_for_tests() -> str:
    """The URL of this run's own database, created on the first call.

    When the server cannot be reached the server's URL is returned unchanged: the
    test's own connection then fails and `connect_or_skip` says so.
    """
    global _run_database
    server = server_url_for_tests()
    with _lock:
        if _run_database is None:
            try:
                _run_database = _in_own_loop(_create_run_database(server))
            except (OSError, TimeoutError, asyncpg.PostgresError):
                return server
    return with_database(server, _run_database)


def drop_run_database() -> None:
    """Drop this run's database, if one was created (the end of the test session)."""
    global _run_database
    with _lock:
        name, _run_database = _run_database, None
    if name is not None:
        _in_own_loop(_drop_database(server_url_for_tests(), name))


def with_database(url: str, database: str) -> str:
    """`url` naming `database` instead of its own."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{database}"))


def with_settings(url: str, **settings: str) -> str:
    """The URL with `settings` for every connection (asyncpg passes unknown query
    parameters on as server settings)."""
    parts = urlsplit(url)
    query = "&".join(filter(None, [parts.query, urlencode(settings)]))
    return urlunsplit(parts._replace(query=query))


def with_search_path(url: str, schema: str) -> str:
    """The URL whose connections all use `schema`."""
    return with_settings(url, search_path=schema)


async def connect_or_skip(url: str) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(url, timeout=5)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        message = f"{UNREACHABLE} at {urlsplit(url).netloc}: {exc}"
        if os.environ.get("REQUIRE_POSTGRES"):
            pytest.fail(f"{message} (REQUIRE_POSTGRES is set)")
        pytest.skip(message)


@asynccontextmanager
async def fresh_schema() -> AsyncIterator[str]:
    """A URL whose connections all use a new, empty schema; dropped afterwards."""
    url = database_url_for_tests()
    admin = await connect_or_skip(url)
    schema = f"test_{uuid.uuid4().hex[:12]}"
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield with_search_path(url, schema)
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()


@pytest_asyncio.fixture
async def postgres_url() -> AsyncIterator[str]:
    """A URL whose connections all use a new, empty schema; dropped after the test."""
    async with fresh_schema() as url:
        yield url


async def _create_run_database(server: str) -> str:
    name = f"{RUN_DATABASE_PREFIX}{int(time.time())}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(server, timeout=5)
    try:
        for stale in await admin.fetch(
            "SELECT datname FROM pg_database WHERE datname LIKE $1", RUN_DATABASE_PREFIX + "%"
        ):
            if _created_at(stale["datname"]) < time.time() - STALE_AFTER_SECONDS:
                await admin.execute(f'DROP DATABASE IF EXISTS "{stale["datname"]}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return name


async def _drop_database(server: str, name: str) -> None:
    admin = await asyncpg.connect(server, timeout=5)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def _created_at(name: str) -> float:
    stamp = name.removeprefix(RUN_DATABASE_PREFIX).split("_", 1)[0]
    return float(stamp) if stamp.isdigit() else 0.0


def _in_own_loop(work: Coroutine[Any, Any, T]) -> T:
    """Run `work` to its end on a loop of its own in a thread of its own, so it works
    whether or not the caller is inside a running event loop."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(asyncio.run(work))
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=run, name="test-database")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]
