"""One bot's figures read through the same indexes as everyone's: each store's statements
for one bot (`queries(True)`) add a condition on the rows (its Telegram and its API key
ranges), never a scan of a table."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import aiosqlite
import asyncpg

from storage.postgres import stats as postgres_stats
from storage.sqlite import stats as sqlite_stats
from storage.sqlite.store import SqliteStore
from tests.postgres import postgres_url  # noqa: F401  (fixture)
from tests.store_contract import STORE_KINDS


async def test_one_bots_sqlite_figures_are_read_through_an_index_on_the_period(
    tmp_path: Path,
) -> None:
    """No statement of one bot's figures scans a whole table: each searches an index."""
    store = await SqliteStore.open(tmp_path / "plan.sqlite3")
    await store.close()
    queries = dataclasses.astuple(sqlite_stats.queries(True))
    assert all("substr(" in query for query in queries)
    async with aiosqlite.connect(tmp_path / "plan.sqlite3") as db:
        for query in queries:
            arguments = ("tg2:",) * len(set(re.findall(r"\?\d+", query)))
            plan = [row[3] for row in await db.execute_fetchall(
                f"EXPLAIN QUERY PLAN {query}", arguments
            )]  # fmt: skip
            scans = [step for step in plan if step.startswith("SCAN") and "subquery" not in step]
            assert scans == [], (query, plan)
            assert any("USING" in step and "INDEX" in step for step in plan), (query, plan)


async def test_one_bots_postgres_figures_can_be_read_through_an_index(tmp_path: Path) -> None:
    """With sequential scans priced out, every statement of one bot's figures uses an index."""
    postgres = STORE_KINDS[1]
    address = await postgres.new_database(tmp_path)
    try:
        store = await postgres.open(address)
        await store.close()
        connection = await asyncpg.connect(address)
        try:
            await connection.execute("SET enable_seqscan = off")
            q = postgres_stats.queries(True)
            days, times, bot = ("2025-11-27", "2025-11-27"), (1.0, 2.0), ("tg2:", "api2:")
            arguments = {
                q.started: (*times, *bot),
                q.ended: (*times, 0.5, 0.95, *bot),
                q.rounds: (*times, 10, *bot),
                q.people: (*days, *times, *bot),
                q.totals: (*days, *bot),
                q.by_model: (*days, 50, *bot),
                q.tool_calls: (*days, *bot),
            }
            assert len(arguments) == len(dataclasses.fields(q))
            for query, values in arguments.items():
                plan = "\n".join(
                    row[0] for row in await connection.fetch(f"EXPLAIN {query}", *values)
                )
                assert "Seq Scan" not in plan, (query, plan)
        finally:
            await connection.close()
    finally:
        await postgres.drop_database(address)
