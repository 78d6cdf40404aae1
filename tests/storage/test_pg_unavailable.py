"""Which PostgreSQL errors mean "the database is unavailable": decided by SQLSTATE class,
so an error asyncpg has no class of its own for is classified all the same."""

from __future__ import annotations

import asyncpg
import pytest

from storage.postgres.faults import is_unavailable


def server_error(sqlstate: str) -> asyncpg.PostgresError:
    """The error asyncpg builds from a server's ErrorResponse with this SQLSTATE."""
    error = asyncpg.PostgresError.new({"C": sqlstate, "M": f"server says {sqlstate}", "S": "FATAL"})
    assert isinstance(error, asyncpg.PostgresError)
    return error


UNAVAILABLE = {
    "08006": "connection failure",
    "08001": "the client could not connect",
    "08P01": "protocol violation",
    "08ZZZ": "a connection exception asyncpg has no class for",
    "28P01": "the password was changed under a running process",
    "53100": "disk full",
    "53200": "out of memory",
    "53300": "too many connections",
    "53ZZZ": "insufficient resources of a kind not yet known",
    "55000": "the database does not accept connections (ALLOW_CONNECTIONS false)",
    "55P03": "a lock not granted within lock_timeout",
    "57P01": "admin shutdown (pg_terminate_backend)",
    "57P02": "crash shutdown",
    "57P03": "cannot connect now (starting up, shutting down)",
    "57P04": "the database was dropped",
    "57P05": "idle session timeout",
    "57014": "statement_timeout or a cancel by an administrator",
    "58030": "I/O error",
    "25006": "a read-only transaction (a demoted or standby server)",
    "3D000": "the database does not exist (dropped or renamed)",
    "XX001": "data corrupted",
    "XX002": "index corrupted",
}

THE_STATEMENTS = {
    "23505": "unique violation",
    "23503": "foreign key violation",
    "22P02": "invalid text representation",
    "22021": "a character not in the encoding (NUL)",
    "42P01": "undefined table (a missing migration: a bug)",
    "42601": "syntax error",
    "40001": "serialization failure",
    "40P01": "deadlock (an ordering bug)",
    "55006": "object in use",
    "XX000": "internal error (a server bug the same statement hits again)",
}


@pytest.mark.parametrize("sqlstate", sorted(UNAVAILABLE))
def test_errors_of_the_database_are_unavailable(sqlstate: str) -> None:
    """Each of these leaves the statement undone and can pass with time."""
    assert is_unavailable(server_error(sqlstate)), UNAVAILABLE[sqlstate]


@pytest.mark.parametrize("sqlstate", sorted(THE_STATEMENTS))
def test_errors_of_the_statement_are_not(sqlstate: str) -> None:
    """A constraint, bad data or a bug is the request's or the code's, not an outage."""
    assert not is_unavailable(server_error(sqlstate)), THE_STATEMENTS[sqlstate]


@pytest.mark.parametrize(
    "error",
    [
        ConnectionRefusedError(111, "Connection refused"),
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError(),
        asyncpg.InterfaceError("connection is closed"),
        # a pooled connection whose backend was terminated while it sat idle
        asyncpg.InternalClientError(
            "cannot switch to state 11; another operation (2) is in progress"
        ),
        asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle"),
        asyncpg.exceptions.ObjectNotInPrerequisiteStateError("not accepting connections"),
        asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
        asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator"),
    ],
    ids=type,
)
def test_the_way_to_the_database_failing_is_unavailable(error: Exception) -> None:
    """Raised by the client itself, or by asyncpg's class for the code."""
    assert is_unavailable(error)


@pytest.mark.parametrize("error", [ValueError("bad"), KeyError("x"), RuntimeError("bug")])
def test_other_errors_are_not(error: Exception) -> None:
    assert not is_unavailable(error)
