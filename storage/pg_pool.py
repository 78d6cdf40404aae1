"""Connection pools to PostgreSQL, and which of its errors mean "unavailable".

Invariant: a connection problem, a database that does not answer, a full disk or a
server shutting down leaves this package as `core.errors.StoreUnavailable` (the
transaction rolled back, so the same request can be made again); a server that cannot be
reached at start-up, or a URL that is wrong, is `DatabaseUnusable` with one line saying
why. Every pool of this package is opened here, the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

from core.errors import StoreUnavailable
from storage.faults import DatabaseUnusable
from storage.pg_schema import migrate

log = logging.getLogger(__name__)

T = TypeVar("T")

CONNECT_TIMEOUT = 10.0
COMMAND_TIMEOUT = 30.0

UNAVAILABLE = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InsufficientResourcesError,  # disk full, out of memory, too many connections
    asyncpg.exceptions.OperatorInterventionError,  # shutdown, cancelled by an admin
    asyncpg.exceptions.CannotConnectNowError,
)
"""Errors of the database or the way to it, not of the statement."""


async def open_pool(
    url: str,
    *,
    size: int,
    purpose: str = "",
    migrated: bool = False,
    server_settings: dict[str, str] | None = None,
) -> asyncpg.Pool:
    """A pool of at most `size` connections; with `migrated`, missing migrations applied
    first (one process at a time). `purpose` names the pool in the error at start-up."""
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
    if migrated:
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
    except UNAVAILABLE as error:
        raise StoreUnavailable(f"the {what} is unavailable ({describe(error)})") from error


def describe(error: BaseException) -> str:
    """The error's type and the first line of its message."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


async def keep_session(connection: asyncpg.Connection) -> None:
    """The `reset` of this package's pools: nothing beyond what asyncpg always does.

    asyncpg always rolls back a transaction left open when a connection goes back to
    its pool. Its default reset adds one more round trip per release (unlock advisory
    locks, close cursors, UNLISTEN, RESET ALL) for session state these pools never
    create: their advisory locks are transaction-scoped, they open no cursors outside
    a transaction, and listening and session locks use connections of their own.
    """
