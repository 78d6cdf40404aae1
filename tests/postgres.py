"""PostgreSQL for tests: a fresh schema per test in the database at TEST_DATABASE_URL.

Where PostgreSQL cannot be reached the tests that need it are skipped with one line,
except when REQUIRE_POSTGRES is set (CI sets it): then they fail, so a green CI run
always means they ran.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlencode, urlsplit, urlunsplit

import asyncpg
import pytest
import pytest_asyncio

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def database_url_for_tests() -> str:
    return os.environ.get("TEST_DATABASE_URL", DEFAULT_URL)


def with_search_path(url: str, schema: str) -> str:
    """The URL with `search_path` set for every connection (asyncpg passes unknown query
    parameters on as server settings)."""
    parts = urlsplit(url)
    query = "&".join(filter(None, [parts.query, urlencode({"search_path": schema})]))
    return urlunsplit(parts._replace(query=query))


async def connect_or_skip(url: str) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(url, timeout=5)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        message = f"PostgreSQL is not reachable at {urlsplit(url).netloc}: {exc}"
        if os.environ.get("REQUIRE_POSTGRES"):
            pytest.fail(f"{message} (REQUIRE_POSTGRES is set)")
        pytest.skip(message)


@pytest_asyncio.fixture
async def postgres_url() -> AsyncIterator[str]:
    """A URL whose connections all use a new, empty schema; dropped after the test."""
    url = database_url_for_tests()
    admin = await connect_or_skip(url)
    schema = f"test_{uuid.uuid4().hex[:12]}"
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield with_search_path(url, schema)
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()
