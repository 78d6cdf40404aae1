"""Connection pools to PostgreSQL, and which of its errors mean "unavailable".

Invariant: a connection problem, a database that does not answer, a full disk or a
server shutting down leaves this package as `core.errors.StoreUnavailable` (the
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

from core.errors import StoreUnavailable
from storage.faults import DatabaseUnusable
from storage.pg_schema import migrate

log = logging.getLogger(__name__)

T = TypeVar("T")

CONNECT_TIMEOUT = 10.0
COMMAND_TIMEOUT = 30.0

UNAVAILABLE_CLASSES = frozenset({"08", "28", "53", "57", "58"})
"""SQLSTATE classes of a database that cannot serve anyone now: connection exception,
invalid authorization (the server refuses this client at connect), insufficient
resources (disk full, out of memory, too many connections), operator intervention
(shutdown, crash, "cannot connect now", a database dropped, a statement cancelled by an
administrator or `statement_timeout`), system error (I/O)."""

UNAVAILABLE_CODES = frozenset({"55000", "55P03", "25006", "3D000", "XX001", "XX002"})
"""Single SQLSTATEs of the same kind: object not in prerequisite state (a database not
accepting connections), lock not available (`lock_timeout`), read-only transaction (a
server in recovery or demoted after a failover), the database does not exist (dropped or
renamed under a running process), data or index corrupted. Not XX000 (internal error): a
server bug that the same statement hits again, so reported as what it is."""

_CLIENT_SIDE = (OSError, TimeoutError, asyncpg.InterfaceError, asyncpg.InternalClientError)
"""The way to the database failed (refused, reset, no answer in time, connection closed), or
asyncpg found its connection in a state it cannot use: a backend terminated while the
connection sat idle in its pool fails the next statement with "cannot switch to state …;
another operation is in progress" before anything is sent."""


def is_unavailable(error: BaseException) -> bool:
    """True for an error of the database or the way to it rather than of the statement:
    the statement did not take effect, and the same call can succeed later.

    Decided by the error's SQLSTATE class, not by a list of exception types, so a code
    asyncpg maps to a class of its own (or to none) is classified all the same.
    """
    if isinstance(error, _CLIENT_SIDE):
        return True
    if not isinstance(error, asyncpg.PostgresError):
        return False
    code = str(getattr(error, "sqlstate", None) or "")
    return code[:2] in UNAVAILABLE_CLASSES or code in UNAVAILABLE_CODES


def unavailable(error: BaseException, what: str = "database") -> StoreUnavailable:
    """`StoreUnavailable` naming `what` and the error, to raise `from error`."""
    return StoreUnavailable(f"the {what} is unavailable ({describe(error)})")


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
    except Exception as error:
        if is_unavailable(error):
            raise unavailable(error, what) from error
        raise


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
