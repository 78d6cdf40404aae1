"""The PostgreSQL phase (`python -m bench --postgres`): the same workload on one worker with
SQLite, one worker on PostgreSQL and two workers on PostgreSQL sharing one schema.

The workers poll (the one leading the polling puts updates into the shared inbox, both work
it): the fake Bot API answers getUpdates but never calls a webhook, so polling is the mode the
driver can drive without a forwarder of its own in the measured path.

Invariants: each PostgreSQL run uses a schema of its own in the database at
TEST_DATABASE_URL (127.0.0.1), created before and dropped after, also on failure; every
process started is stopped in a `finally`. Round trips are counted on both sides: by the
workers' drivers (`bench.counted_bot`) and by PostgreSQL (`pg_stat_database` transactions,
database-wide, so other clients of that database add noise; `pg_stat_user_tables` for the
run's own schema, which nothing else touches).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import aiohttp
import asyncpg

from bench.driver import Driver
from bench.procs import Child, Processes
from bench.runs import TOKEN, latencies, per_round

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
KINDS = {"sqlite-1": 0, "pg-1": 1, "pg-2": 2}  # name -> PostgreSQL workers (0: SQLite, one)


def test_database_url() -> str:
    url = os.environ.get("TEST_DATABASE_URL", DEFAULT_URL)
    if urlsplit(url).hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"the benchmark only uses a local PostgreSQL, not {urlsplit(url).netloc}")
    return url


def with_settings(url: str, **settings: str) -> str:
    """The URL with server settings for every connection (asyncpg passes unknown query
    parameters on as server settings)."""
    parts = urlsplit(url)
    query = "&".join(filter(None, [parts.query, urlencode(settings)]))
    return urlunsplit(parts._replace(query=query))


class PostgresBench:
    def __init__(
        self, procs: Processes, scratch: Path, *, seconds: float, chats: int, idle_rounds: int
    ) -> None:
        self.procs = procs
        self.scratch = scratch
        self.seconds = seconds
        self.chats = chats
        self.idle_rounds = idle_rounds
        self.admin_url = test_database_url()
        self.runs = 0

    async def run(self, kind: str) -> dict[str, Any]:
        """The workload against a fresh set of workers of `kind` (a key of KINDS)."""
        self.runs += 1
        workers = KINDS[kind]
        tag = f"bench_{uuid.uuid4().hex[:10]}"
        admin = await asyncpg.connect(self.admin_url, timeout=5) if workers else None
        children: list[Child] = []
        try:
            env: dict[str, str] = {}
            if admin is not None:
                await admin.execute(f'CREATE SCHEMA "{tag}"')
                env["DATABASE_URL"] = with_settings(
                    self.admin_url, search_path=tag, application_name=tag
                )
            return await self._measure(kind, workers, tag, env, admin, children)
        finally:
            for child in children:
                self.procs.stop(child)
            if admin is not None:
                await admin.execute(f'DROP SCHEMA IF EXISTS "{tag}" CASCADE')
                await admin.close()

    async def _measure(
        self,
        kind: str,
        workers: int,
        tag: str,
        env: dict[str, str],
        admin: asyncpg.Connection | None,
        children: list[Child],
    ) -> dict[str, Any]:
        tg = self.procs.start(f"fake-telegram-pg{self.runs}", ["-m", "bench.fakes", "telegram"])
        children.append(tg)
        model = self.procs.start(f"fake-model-pg{self.runs}", ["-m", "bench.fakes", "model"])
        children.append(model)
        tg_port, model_port = self.procs.port_of(tg), self.procs.port_of(model)
        counts = [self.scratch / f"{kind}-{self.runs}-w{n}.json" for n in range(max(workers, 1))]
        bots = []
        for n, path in enumerate(counts):
            bot_env = {
                "TELEGRAM_BOT_TOKEN": TOKEN,
                "TELEGRAM_API_BASE_URL": f"http://127.0.0.1:{tg_port}/bot",
                "OPENAI_API_KEY": "bench",
                "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
                "LLM_MODEL": "fake-model",
                "DB_PATH": str(self.scratch / f"{kind}-{self.runs}.sqlite3"),
                "USER_RATE_LIMIT_PER_MINUTE": "0",
                "DEFAULT_MAX_ROUNDS": "10",
                "MAX_ROUNDS_LIMIT": "20",
                "LOG_LEVEL": "INFO",
                "BENCH_COUNTS_FILE": str(path),
                **profiled(path),
                **env,
            }
            bots.append(
                self.procs.start(f"{kind}-{self.runs}-w{n}", ["-m", "bench.counted_bot"], bot_env)
            )
        children[:0] = bots  # workers stop first
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http,
            Driver(http, tg_port, model_port) as driver,
        ):
            if not await driver.wait_ready() or not await all_running(bots):
                raise RuntimeError(f"{kind} did not start:\n" + "\n".join(b.tail() for b in bots))
            await driver.closed_loop(20, 1.0)  # warm-up: pools, prepared statements, pages
            idle = await driver.sequential(self.idle_rounds)
            before = await self._snapshot(bots, counts, admin, tag)
            calls0 = driver.method_counts.copy()
            loop = await driver.closed_loop(self.chats, self.seconds)
            calls = driver.method_counts - calls0
            after = await self._snapshot(bots, counts, admin, tag)
        rounds = max(loop.completed_total, 1)
        return {
            "kind": kind,
            "workers": max(workers, 1),
            "throughput": loop.per_second,
            "drained": loop.drained,
            "rounds": loop.completed_total,
            "idle": latencies(idle),
            "load": latencies(loop.rounds),
            "requests_per_round": per_round(calls, loop.completed_total),
            **per_round_deltas(before, after, rounds),
        }

    async def _snapshot(
        self,
        bots: list[Child],
        counts: list[Path],
        admin: asyncpg.Connection | None,
        tag: str,
    ) -> dict[str, Any]:
        await asyncio.sleep(0.3)  # the counters file is rewritten every 0.1 s
        snap: dict[str, Any] = {
            "bot_cpu": sum(b.cpu_seconds() for b in bots),
            "client": merge_counts(counts),
        }
        if admin is not None:
            snap.update(await settled_server_stats(admin, tag))
        return snap


def profiled(counts: Path) -> dict[str, str]:
    """With BENCH_PROFILE_DIR set, each worker writes its cProfile stats there."""
    folder = os.environ.get("BENCH_PROFILE_DIR")
    return {"BENCH_PROFILE": str(Path(folder) / (counts.stem + ".prof"))} if folder else {}


async def all_running(bots: list[Child], timeout: float = 30.0) -> bool:  # noqa: ASYNC109
    """Every worker has logged that it runs (the leader polls; the others work the inbox)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all("is running" in b.tail(200) for b in bots):
            return True
        await asyncio.sleep(0.2)
    return False


def merge_counts(paths: list[Path]) -> dict[str, Any]:
    total: dict[str, float] = {}
    statements: dict[str, float] = {}
    for path in paths:
        found = json.loads(path.read_text()) if path.exists() else {}
        for key, value in found.get("counts", {}).items():
            total[key] = total.get(key, 0) + value
        for key, value in found.get("statements", {}).items():
            statements[key] = statements.get(key, 0) + value
    return {"counts": total, "statements": statements}


async def server_stats(admin: asyncpg.Connection, tag: str) -> dict[str, Any]:
    await admin.execute("SELECT pg_stat_clear_snapshot()")
    xacts = await admin.fetchval(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database"
        " WHERE datname = current_database()"
    )
    rows = await admin.fetch(
        "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables"
        " WHERE schemaname = $1",
        tag,
    )
    pids = await admin.fetch("SELECT pid FROM pg_stat_activity WHERE application_name = $1", tag)
    wal = await admin.fetchval("SELECT wal_bytes FROM pg_stat_wal")
    return {
        "xacts": int(xacts),
        "tables": {r["relname"]: [r["n_tup_ins"], r["n_tup_upd"], r["n_tup_del"]] for r in rows},
        "backend_cpu": {r["pid"]: process_cpu(r["pid"]) for r in pids},
        "wal_bytes": float(wal),
    }


async def settled_server_stats(admin: asyncpg.Connection, tag: str) -> dict[str, Any]:
    """PostgreSQL's statistics once the workers' backends have reported theirs: an idle
    backend flushes its counters within about ten seconds, so read until the run's own
    tables stop changing (at most twelve seconds)."""
    stats = await server_stats(admin, tag)
    for _ in range(12):
        await asyncio.sleep(1.0)
        again = await server_stats(admin, tag)
        if again["tables"] == stats["tables"] and sum(map(sum, again["tables"].values())):
            return again
        stats = again
    return stats


def process_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def per_round_deltas(before: dict[str, Any], after: dict[str, Any], rounds: int) -> dict[str, Any]:
    c0, c1 = before["client"], after["client"]
    counts = {
        key: round((value - c0["counts"].get(key, 0)) / rounds, 2)
        for key, value in c1["counts"].items()
    }
    statements = {
        key: round((value - c0["statements"].get(key, 0)) / rounds, 2)
        for key, value in sorted(c1["statements"].items())
        if value - c0["statements"].get(key, 0) > 0
    }
    out: dict[str, Any] = {
        "cpu_ms_per_round": 1000 * (after["bot_cpu"] - before["bot_cpu"]) / rounds,
        "client_per_round": counts,
        "statements_per_round": statements,
    }
    if "xacts" in after:
        out["pg_xacts_per_round"] = (after["xacts"] - before["xacts"]) / rounds
        out["pg_connections"] = len(after["backend_cpu"])  # all workers', once the load ended
        out["pg_wal_bytes_per_round"] = (after["wal_bytes"] - before["wal_bytes"]) / rounds
        cpu0 = before["backend_cpu"]
        out["pg_backend_cpu_ms_per_round"] = (
            1000 * sum(v - cpu0.get(pid, 0.0) for pid, v in after["backend_cpu"].items()) / rounds
        )
        out["pg_rows_per_round"] = {
            table: [
                round((a - b) / rounds, 2)
                for a, b in zip(v, before["tables"].get(table, [0, 0, 0]), strict=True)
            ]
            for table, v in sorted(after["tables"].items())
        }
    return out
