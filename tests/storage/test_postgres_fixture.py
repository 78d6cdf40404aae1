"""The PostgreSQL test fixture: each run works in a database of its own."""

from __future__ import annotations

import asyncpg

from tests.postgres import RUN_DATABASE_PREFIX, postgres_url, server_url_for_tests  # noqa: F401


async def test_a_run_works_in_a_database_of_its_own(postgres_url: str) -> None:  # noqa: F811
    """Two runs on one machine share no tables and no advisory locks (both database-wide)."""
    connection = await asyncpg.connect(postgres_url)
    try:
        database = await connection.fetchval("SELECT current_database()")
    finally:
        await connection.close()
    assert database.startswith(RUN_DATABASE_PREFIX)
    assert f"/{database}" not in server_url_for_tests()
