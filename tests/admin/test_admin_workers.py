"""The dashboard's workers and inbox on PostgreSQL: a bot runtime's heartbeat shows as a
worker seen until it stops (its row deleted) or, when it died without leaving, ages; the
updates waiting in the shared inbox and the dead letters as they are stored; counts bounded
whatever the tables hold; the heartbeat outlives a database outage."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import pytest

from app.heartbeat import heartbeat
from app.runtime import open_runtime
from storage.postgres.cluster import dead_letters, inbox, workers
from storage.postgres.cluster.inbox import PostgresInbox
from storage.postgres.cluster.pool import open_shared_pool
from storage.postgres.cluster.schema import migrate
from telemetry.supervision import LoopRegistry
from tests.admin_harness import Console, console_settings, running_console
from tests.pg_outage import Outage, outage  # noqa: F401  (fixture)
from tests.store_contract import STORE_KINDS

POSTGRES = STORE_KINDS[1]


@pytest.fixture
async def console(tmp_path: Path) -> AsyncIterator[Console]:
    address = await POSTGRES.new_database(tmp_path)
    try:
        async with running_console(console_settings(POSTGRES, address)) as c:
            assert await c.sign_in() == 303
            yield c
    finally:
        await POSTGRES.drop_database(address)


def figure(html: str, what: str) -> str:
    found = re.search(rf'<span class="value">([^<]*)</span> <span class="what">{what}</span>', html)
    assert found is not None, what
    return found.group(1)


def worker_rows(html: str) -> list[list[str]]:
    table = re.search(r"<h3>Workers</h3>\s*<table class=\"list\">(.*?)</table>", html, re.S)
    if table is None:
        return []
    return [
        re.findall(r"<td[^>]*>([^<]*)</td>", row)
        for row in re.findall(r"<tr>(<td.*?)</tr>", table.group(1), re.S)
    ]


async def dashboard(console: Console) -> str:
    status, html = await console.page("/admin/")
    assert status == 200
    return html


async def test_a_running_workers_heartbeat_shows_until_it_stops(console: Console) -> None:
    """A bot runtime (inbox and background jobs on) is one worker seen, listed with this
    host and process id; once it closed, its row is gone."""
    html = await dashboard(console)
    assert figure(html, "workers seen") == "0"
    assert "No worker seen in the last day." in html
    async with open_runtime(console.settings, inbox=True) as runtime:
        for _ in range(100):
            html = await dashboard(console)
            if figure(html, "workers seen") == "1":
                break
            await asyncio.sleep(0.05)
        assert figure(html, "workers seen") == "1"
        assert runtime.loops.problems() == {} and "heartbeat" in runtime.loops.names()
        [row] = worker_rows(html)
        assert row[:2] == [socket.gethostname(), str(os.getpid())]
        assert row[2].endswith(" UTC") and row[3].endswith(" s ago")
    html = await dashboard(console)
    assert figure(html, "workers seen") == "0"
    assert worker_rows(html) == []


async def test_a_worker_that_died_without_leaving_ages_and_is_forgotten(
    console: Console,
) -> None:
    """Its last beat five minutes ago: listed with its age, not counted as seen; once
    not seen for a day, another worker's beat forgets it."""
    url = console.settings.secret("database_url")
    assert url
    now = time.time()
    console.clock.now = now
    gone = workers.Worker("dead", "host-b", 4242, now - 3600, now - 300)
    connection = await asyncpg.connect(url)
    try:
        await workers.beat(connection, gone, now - 300)
        html = await dashboard(console)
        assert figure(html, "workers seen") == "0"
        assert worker_rows(html) == [["host-b", "4242", row_started(now - 3600), "5 min ago"]]
        await workers.beat(connection, gone, now - workers.FORGET_AFTER - 1)
        html = await dashboard(console)
        assert [row[3] for row in worker_rows(html)] == ["24.0 h ago"]
        await workers.beat(connection, workers.this_process(now), now)
    finally:
        await connection.close()
    html = await dashboard(console)
    assert figure(html, "workers seen") == "1"
    assert [row[1] for row in worker_rows(html)] == [str(os.getpid())]


def row_started(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


async def test_the_inbox_depth_and_dead_letters_are_what_is_stored(console: Console) -> None:
    """Three updates accepted and one given up: 3 waiting, 1 dead letter, the oldest
    waiting for as long as the console's clock says since it arrived."""
    url = console.settings.secret("database_url")
    assert url
    shared = await PostgresInbox.open(url)
    try:
        for update_id, chat in ((11, "tg:1"), (12, "tg:1"), (13, "tg:2"), (14, "tg:3")):
            assert await shared.put(update_id, chat, "{}")
        await shared.bury(14, "tg:3", "{}", "attempts")
    finally:
        await shared.close()
    console.clock.now = time.time() + 90
    html = await dashboard(console)
    assert figure(html, "updates waiting") == "3"
    assert figure(html, "dead letters") == "1"
    assert figure(html, "oldest waiting") in {"90 s", "91 s"}


async def test_the_counts_are_bounded_whatever_the_tables_hold(console: Console) -> None:
    """Past the bound the reads stop counting: "at least" is what they say."""
    url = console.settings.secret("database_url")
    assert url
    shared = await PostgresInbox.open(url)
    try:
        for update_id in range(1, 6):
            await shared.put(update_id, f"tg:{update_id}", "{}")
        for update_id in (1, 2, 3):
            await shared.bury(update_id, f"tg:{update_id}", "{}", "error")
    finally:
        await shared.close()
    connection = await asyncpg.connect(url)
    try:
        assert await inbox.backlog(connection, bound=1) == (
            1,
            True,
            pytest.approx(time.time(), abs=60),
        )
        assert (await inbox.backlog(connection, bound=2)).more is False
        assert await dead_letters.count_letters(connection, bound=2) == 3
        assert await dead_letters.count_letters(connection, bound=3) == 3
    finally:
        await connection.close()


async def test_the_heartbeat_outlives_a_database_outage(outage: Outage) -> None:  # noqa: F811
    """Beats fail while the database is away (logged, retried) and the loop goes on: once
    it is back, the worker's row is fresh again."""
    migrating = await asyncpg.connect(outage.url)
    try:
        await migrate(migrating)
    finally:
        await migrating.close()
    pool = await open_shared_pool(outage.url, size=1)
    loops = LoopRegistry()
    worker = workers.this_process(time.time())
    task = asyncio.create_task(heartbeat(pool, worker, loops, interval=0.05))

    async def last_seen() -> float | None:
        connection = await asyncpg.connect(outage.url)
        try:
            found = await connection.fetchval(
                "SELECT last_seen_at FROM workers WHERE worker_id = $1", worker.worker_id
            )
        finally:
            await connection.close()
        return None if found is None else float(found)

    try:
        for _ in range(500):
            if await last_seen() is not None:
                break
            await asyncio.sleep(0.02)
        state = loops.state("heartbeat")
        assert state is not None
        await outage.begin()
        await until(lambda: state.failures >= 2)
        assert state.last_error is not None and not task.done()
        await outage.end()
        back = time.time()
        await until(lambda: state.failures == 0)
        # A beat begun just before the end may be the first to succeed: wait for a later one.
        for _ in range(500):
            seen = await last_seen()
            if seen is not None and seen >= back:
                break
            await asyncio.sleep(0.02)
        assert seen is not None and seen >= back
        assert not task.done() and state.ended is None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await pool.close()


async def until(condition: Callable[[], bool], timeout: float = 20.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_figures_that_cannot_be_read_leave_the_rest_of_the_dashboard(
    console: Console,
) -> None:
    """The registry's table gone behind the console: its section says it could not be
    read, and the store's figures are still shown."""
    url = console.settings.secret("database_url")
    assert url
    await POSTGRES.execute(url, "DROP TABLE workers")
    html = await dashboard(console)
    assert "<h2>Workers and inbox</h2>" in html and "Could not be read:" in html
    assert '<td class="key">Started</td>' in html
