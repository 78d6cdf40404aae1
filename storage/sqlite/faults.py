"""Which SQLite errors mean "the store is unavailable" rather than "this request is wrong".

Invariant: an error caused by the database file or the disk under it (full,
I/O error, read-only, deleted or moved, locked by another process past the busy
timeout, corrupt) leaves this package as `core.domain.errors.StoreUnavailable`, with
the SQLite error chained as its cause; every other error (a constraint, a bug)
passes unchanged. Callers can then tell the user "try again later" for the
first kind and keep treating the second as a fault of the request or the code.
"""

from __future__ import annotations

import sqlite3

from core.domain.errors import StoreUnavailable

_FAULT_CODES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,
        sqlite3.SQLITE_NOTADB,
    }
)


def is_store_fault(error: BaseException) -> bool:
    """True for SQLite errors caused by the file or the disk, not by the statement."""
    if not isinstance(error, sqlite3.Error):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is None:  # raised by the sqlite3 module itself, e.g. a closed connection
        return isinstance(error, sqlite3.ProgrammingError) and "closed" in str(error)
    return code & 0xFF in _FAULT_CODES


def translate(error: BaseException) -> BaseException:
    """`StoreUnavailable` (caused by `error`) for a store fault, else `error` itself."""
    if not is_store_fault(error):
        return error
    name = getattr(error, "sqlite_errorname", type(error).__name__)
    unavailable = StoreUnavailable(f"the database is unavailable ({name}: {error})")
    unavailable.__cause__ = error
    return unavailable
