"""Connection pools to PostgreSQL, and which of its errors mean "unavailable".

Invariant: a connection problem, a database that does not answer, a full disk or a
server shutting down leaves this package as `core.domain.errors.StoreUnavailable` (the
transaction rolled back, so the same request can be made again), decided by SQLSTATE
class (`is_unavailable`) so that an error asyncpg has no class for is still one of
these; any other error (a constraint, a bug) passes unchanged; a server that cannot be
reached at start-up, or a URL that is wrong, is `DatabaseUnusable` with one line saying
why. Every pool of this package is opened here, the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

from storage.errors import DatabaseUnusable
from storage.postgres.faults import describe, is_unavailable, unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")
Migrate = Callable[[asyncpg.Connection], Awaitable[list[str]]]
"""A schema's `migrate`: applies what the database lacks, returns the names applied."""

CONNECT_TIMEOUT = 10.0
COMMAND_TIMEOUT = 30.0


async def open_pool(
    url: str,
    *,
    size: int,
    purpose: str = "",
    migrate: Migrate | None = None,
    server_settings: dict[str, str] | None = None,
) -> asyncpg.Pool:
    """A pool of at most `size` connections; with `migrate` (a schema's `migrate`), the
    migrations it lacks applied first (one process at a time). `purpose` names the pool in
    the error at start-up."""
    try:
        pool = await asyncpg.create_pool(
            url,
            reset=keep_session,
            min_size=1,
            max_size=size,
            timeout=CONNECT_TIMEOUT,
            command_timeout=COMMAND_TIMEOUT,
            server_settings=server_settings,
        )
    except (TimeoutError, OSError, asyncpg.PostgresError, ValueError) as error:
        who = f"the {purpose} " if purpose else ""
        raise DatabaseUnusable(f"{who}cannot connect to PostgreSQL: {describe(error)}") from None
    if migrate is not None:
        try:
            async with pool.acquire() as connection:
                applied = await migrate(connection)
        except BaseException:
            await pool.close()
            raise
        if applied:
            log.info("database migrated: %s", ", ".join(applied))
    return pool


async def call(
    pool: asyncpg.Pool, work: Callable[[asyncpg.Connection], Awaitable[T]], what: str = "database"
) -> T:
    """Run `work` on a connection of `pool`; the database's faults as `StoreUnavailable`."""
    try:
        async with pool.acquire() as connection:
            return await work(connection)
    except Exception as error:
        if is_unavailable(error):
            raise unavailable(error, what) from error
        raise


async def keep_session(connection: asyncpg.Connection) -> None:
    """The `reset` of this package's pools: nothing beyond what asyncpg always does.

    asyncpg always rolls back a transaction left open when a connection goes back to
    its pool. Its default reset adds one more round trip per release (unlock advisory
    locks, close cursors, UNLISTEN, RESET ALL) for session state these pools never
    create: their advisory locks are transaction-scoped, they open no cursors outside
    a transaction, and listening and session locks use connections of their own.
    """
