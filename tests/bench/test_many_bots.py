"""The many-bots phase (`bench/many_bots.py`) end to end at a tiny size: real `python -m
bot` processes (through `bench.counted_bot`) on the bench's fakes, the added bots stored
as `bots add` stores them, every bot answering its own chats; on one SQLite process and on
two PostgreSQL workers (a schema of this run's database, dropped afterwards). Every
process it started is stopped, also when a run fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.many_bots import ManyBotsBench, Size, connections_at_most, many_bots_table, medians
from bench.procs import Processes
from tests.postgres import connect_or_skip, database_url_for_tests

TINY = Size(bots=3, chats=2, workers=2, seconds=1.5)


@pytest.mark.parametrize("store", ["sqlite", "pg"])
async def test_the_many_bots_phase_runs_end_to_end_at_a_tiny_size(
    tmp_path: Path, store: str
) -> None:
    """One bot with six chats, then three bots with two chats each: every round answered
    within the run, each bot answering its own chats, no process left running; on PostgreSQL
    the workers' connections are counted and within deployment.md's bound."""
    url = database_url_for_tests()
    if store == "pg":
        await (await connect_or_skip(url)).close()
    procs = Processes(tmp_path)
    bench = ManyBotsBench(procs, tmp_path, TINY, admin_url=url)
    try:
        runs = [await bench.run(store, bots) for bots in (1, TINY.bots)]
    finally:
        procs.stop_all()
    assert procs.children == []
    for run, bots in zip(runs, (1, TINY.bots), strict=True):
        assert run["bots"] == bots and run["chats"] == 6 and run["drained"]
        assert run["rounds"] >= 6 and run["throughput"] > 0
        assert run["load"]["done"]["p99"] > 0
        assert run["workers"] == (2 if store == "pg" else 1)
        if store == "pg":
            assert 0 < run["pg_connections"] <= connections_at_most(bots) * 2
        else:
            assert run["pg_connections"] is None
    assert [run["bots_answering"] for run in runs] == [1, TINY.bots]  # each bot its chats
    table = many_bots_table(runs)
    assert "throughput, rounds/s" in table and f"{store}×" in table
    assert medians(runs + runs) == medians(runs)  # a kind's runs alike: their median is theirs
