"""Which PostgreSQL errors mean "the database is unavailable" rather than "this request is
wrong".

Invariant: a connection problem, a database that does not answer, a full disk or a server
shutting down leaves this package as `core.domain.errors.StoreUnavailable` (the transaction
rolled back, so the same request can be made again), decided by SQLSTATE class
(`is_unavailable`) so that an error asyncpg has no class for is still one of these; any
other error (a constraint, a bug) passes unchanged.
"""

from __future__ import annotations

import asyncpg

from core.domain.errors import StoreUnavailable

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


def describe(error: BaseException) -> str:
    """The error's type and the first line of its message."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
