"""`python -m bench.counted_bot`: `python -m bot` with every database statement counted.

The benchmark's only view into the store's round trips from the client side. Counting is
done by wrapping the drivers in this process (nothing in storage/ changes):
- SQLite: each statement SQLite runs (a trace callback on every connection, BEGIN, COMMIT
  and SAVEPOINTs included), each store operation submitted
  (`storage.sqlite.batch.BatchedConnection.run`) and each hop to an aiosqlite connection's
  thread (one per batch of operations);
- PostgreSQL (asyncpg): each request sent — a statement with arguments, a simple query
  (BEGIN, COMMIT, the pool's reset on release, LISTEN), an executemany.

Invariant: the counts are written to `BENCH_COUNTS_FILE` as JSON (replaced whole, about
ten times a second), so a reader always sees a complete snapshot, at most 0.1 s old.
With `BENCH_PROFILE=<path>` the process runs under cProfile and writes its stats there
when it stops.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
import threading
import time
from collections import Counter
from functools import wraps
from pathlib import Path
from typing import Any

COUNTS: Counter[str] = Counter()  # "sqlite", "sqlite_hops", "sqlite_ops", "pg"
STATEMENTS: Counter[str] = Counter()  # "<driver>: <normalised statement>"
_guard = threading.Lock()

_LITERALS = re.compile(r"'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b|\$\d+")


def normalise(sql: str) -> str:
    """The statement's shape: literals and parameters as `?`, spaces collapsed, cut short."""
    return " ".join(_LITERALS.sub("?", sql).split())[:90]


def _count(driver: str, sql: str) -> None:
    with _guard:
        COUNTS[driver] += 1
        STATEMENTS[f"{driver}: {normalise(sql)}"] += 1


def _count_sqlite() -> None:
    import aiosqlite.core

    connect = sqlite3.connect

    @wraps(connect)
    def counted_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)
        connection.set_trace_callback(lambda sql: _count("sqlite", sql))
        return connection

    setattr(sqlite3, "connect", counted_connect)  # noqa: B010 - aiosqlite looks it up at each connect
    hop = aiosqlite.core.Connection._execute

    @wraps(hop)
    async def counted_hop(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with _guard:
            COUNTS["sqlite_hops"] += 1
        return await hop(self, fn, *args, **kwargs)

    aiosqlite.core.Connection._execute = counted_hop  # type: ignore[method-assign]

    from storage.sqlite.batch import BatchedConnection

    submit = BatchedConnection.run

    @wraps(submit)
    async def counted_submit(self: Any, op: Any) -> Any:
        with _guard:
            COUNTS["sqlite_ops"] += 1
        return await submit(self, op)

    BatchedConnection.run = counted_submit  # type: ignore[method-assign]


def _count_asyncpg() -> None:
    from asyncpg.connection import Connection

    execute, extended, many = Connection.execute, Connection._execute, Connection.executemany

    @wraps(execute)
    async def counted_execute(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        if not args:  # with arguments it goes through _execute, counted there
            _count("pg", query)
        return await execute(self, query, *args, **kwargs)

    @wraps(extended)
    async def counted_extended(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        _count("pg", query)
        return await extended(self, query, *args, **kwargs)

    @wraps(many)
    async def counted_many(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        _count("pg", command)
        return await many(self, command, *args, **kwargs)

    Connection.execute = counted_execute
    Connection._execute = counted_extended
    Connection.executemany = counted_many


def _write_counts(path: Path) -> None:
    while True:
        with _guard:
            snapshot = {"counts": dict(COUNTS), "statements": dict(STATEMENTS)}
        partial = path.with_suffix(".part")
        partial.write_text(json.dumps(snapshot))
        partial.replace(path)
        time.sleep(0.1)


def main() -> int:
    _count_sqlite()
    _count_asyncpg()
    out = os.environ.get("BENCH_COUNTS_FILE")
    if out:
        threading.Thread(target=_write_counts, args=(Path(out),), daemon=True).start()
    from app.cli import main as cli_main

    profile_to = os.environ.get("BENCH_PROFILE")
    if not profile_to:
        return cli_main(["run"])
    import cProfile

    profiler = cProfile.Profile()
    try:
        return profiler.runcall(cli_main, ["run"])
    finally:
        profiler.dump_stats(profile_to)


if __name__ == "__main__":
    sys.exit(main())
