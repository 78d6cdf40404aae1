"""The many-bots phase (`python -m bench --many-bots`): the same chats spread over many bots
against all of them written to one bot, on one SQLite process and on PostgreSQL workers.

By default 20 bots × 50 chats (the deployment's own bot and 19 added with the bots table,
as `consultation-bot bots add` adds them) against one bot with the same 1,000 chats, each
chat writing again as soon as its reply is complete; on one process with SQLite and on
three workers sharing one PostgreSQL schema. The fake Bot API serves every bot's token
(`bench.fakes.bench_tokens`); the workers poll it, one poller per bot.

Invariants: everything runs on 127.0.0.1 against the fakes, bounded in chats and seconds;
each PostgreSQL run uses a schema of its own in the database at TEST_DATABASE_URL, created
before and dropped after, also on failure, and each SQLite run a file of its own; every
process started is stopped in a `finally`. A round is timed inside the fakes
(`bench.driver`), whichever bot answered it.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from app.bots import BotKeeper
from bench.driver import Driver
from bench.fakes import MAIN_TOKEN, bench_tokens
from bench.pg_runs import merge_counts, profiled, test_database_url, with_settings
from bench.procs import Child, Processes
from bench.runs import latencies, per_round
from core.domain.bots import parse_profile
from storage.postgres.store import PostgresStore
from storage.sqlite.store import SqliteStore

SECRET_KEY = "bench-many-bots-secret-key-0123456789"
"""SECRET_KEY of every run: it seals the added bots' tokens."""

STORES = ("sqlite", "pg")


@dataclass(frozen=True, slots=True)
class Size:
    """One many-bots run's size: `bots` × `chats` against one bot with `bots * chats`."""

    bots: int
    chats: int  # per bot
    workers: int  # PostgreSQL workers
    seconds: float  # the closed loop's length


FULL = Size(bots=20, chats=50, workers=3, seconds=10.0)
QUICK = Size(bots=5, chats=10, workers=2, seconds=4.0)
"""`--quick`: a minute or two instead of about five."""

POOL_SIZE = 10
"""The workers' DATABASE_POOL_SIZE: the default, so the connections counted are a
deployment's."""


def connections_at_most(bots: int, pool_size: int = POOL_SIZE) -> int:
    """A polling worker's connections at most (docs/deployment.md, "Connections per
    worker"): the store pool, the shared pool (5), the inbox pool (4), the inbox's one
    LISTEN connection, the claims, the polling leadership; each added bot its polling
    leadership."""
    return pool_size + 5 + 4 + 3 + (bots - 1)


class ManyBotsBench:
    def __init__(
        self, procs: Processes, scratch: Path, size: Size, *, admin_url: str | None = None
    ) -> None:
        self.procs = procs
        self.scratch = scratch
        self.size = size
        self.admin_url = admin_url or test_database_url()
        self.runs = 0

    async def run(self, store: str, bots: int) -> dict[str, Any]:
        """The size's chats written to `bots` bots (1, or the size's), on `store` (one of
        STORES): one process on SQLite, the size's workers on PostgreSQL."""
        self.runs += 1
        workers = self.size.workers if store == "pg" else 1
        tag = f"bench_{uuid.uuid4().hex[:10]}"
        admin = await asyncpg.connect(self.admin_url, timeout=5) if store == "pg" else None
        children: list[Child] = []
        try:
            if admin is not None:
                await admin.execute(f'CREATE SCHEMA "{tag}"')
                database = with_settings(self.admin_url, search_path=tag, application_name=tag)
                await warn_of_connections(admin, workers, bots)
            else:
                database = str(self.scratch / f"many-{self.runs}.sqlite3")
            return await self._measure(store, workers, bots, database, admin, tag, children)
        finally:
            for child in children:
                self.procs.stop(child)
            if admin is not None:
                await admin.execute(f'DROP SCHEMA IF EXISTS "{tag}" CASCADE')
                await admin.close()

    async def _measure(
        self,
        store: str,
        workers: int,
        bots: int,
        database: str,
        admin: asyncpg.Connection | None,
        tag: str,
        children: list[Child],
    ) -> dict[str, Any]:
        name = f"many-{store}-{bots}x-{self.runs}"
        tg = self.procs.start(
            f"fake-telegram-{name}", ["-m", "bench.fakes", "telegram", "--bots", str(bots)]
        )
        children.append(tg)
        model = self.procs.start(f"fake-model-{name}", ["-m", "bench.fakes", "model"])
        children.append(model)
        tg_port, model_port = self.procs.port_of(tg), self.procs.port_of(model)
        base_url = f"http://127.0.0.1:{tg_port}/bot"
        tokens = list(bench_tokens(bots))
        await add_bots(store, database, base_url, tokens[1:])
        counts = [self.scratch / f"{name}-w{n}.json" for n in range(workers)]
        store_env = {"DATABASE_URL": database} if store == "pg" else {"DB_PATH": database}
        launched = time.monotonic()
        processes = []
        for n, path in enumerate(counts):
            env = {
                "TELEGRAM_BOT_TOKEN": MAIN_TOKEN,
                "TELEGRAM_API_BASE_URL": base_url,
                "OPENAI_API_KEY": "bench",
                "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
                "LLM_MODEL": "fake-model",
                "SECRET_KEY": SECRET_KEY,
                "USER_RATE_LIMIT_PER_MINUTE": "0",
                "DEFAULT_MAX_ROUNDS": "10",
                "MAX_ROUNDS_LIMIT": "20",
                "DATABASE_POOL_SIZE": str(POOL_SIZE),
                "LOG_LEVEL": "INFO",
                "BENCH_COUNTS_FILE": str(path),
                **profiled(path),
                **store_env,
            }
            processes.append(self.procs.start(f"{name}-w{n}", ["-m", "bench.counted_bot"], env))
        children[:0] = processes  # workers stop first
        chats = self.size.bots * self.size.chats

        def route(chat: int) -> str:
            return tokens[chat % bots]

        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http,
            Driver(http, tg_port, model_port, route=route) as driver,
        ):
            if not await every_bot_running(processes, bots):
                tails = "\n".join(p.tail() for p in processes)
                raise RuntimeError(f"{name}: not every bot started:\n{tails}")
            started_s = time.monotonic() - launched
            await driver.closed_loop(max(2 * bots, 20), 1.0)  # warm-up: every bot's path
            idle = await idle_cost(processes, counts, IDLE_SECONDS)
            cpu0 = sum(p.cpu_seconds() for p in processes)
            client0 = merge_counts(counts)
            calls0 = driver.method_counts.copy()
            sent0 = driver.sent_by_bot.copy()
            loop = await driver.closed_loop(chats, self.size.seconds)
            calls = driver.method_counts - calls0
            sent = driver.sent_by_bot - sent0
            connections = None
            if admin is not None:
                connections = await admin.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", tag
                )
            await asyncio.sleep(0.3)  # the counters file is rewritten every 0.1 s
            cpu = sum(p.cpu_seconds() for p in processes) - cpu0
            client = merge_counts(counts)
        rounds = max(loop.completed_total, 1)
        return {
            "store": store,
            "workers": workers,
            "bots": bots,
            "chats": chats,
            "seconds": self.size.seconds,
            "throughput": loop.per_second,
            "drained": loop.drained,
            "rounds": loop.completed_total,
            "load": latencies(loop.rounds),
            "cpu_ms_per_round": 1000 * cpu / rounds,
            "requests_per_round": per_round(calls, loop.completed_total),
            "get_updates_per_s": calls.get("getUpdates", 0) / self.size.seconds,
            "bots_answering": len(sent),  # bots that sent a reply in the measured load
            "db_requests_per_round": {
                key: round((value - client0["counts"].get(key, 0)) / rounds, 2)
                for key, value in client["counts"].items()
            },
            "pg_connections": connections,
            "pg_connections_at_most": connections_at_most(bots) * workers if admin else None,
            "idle_db_requests_per_s": idle["db_requests_per_s"],
            "idle_cpu_ms_per_s": idle["cpu_ms_per_s"],
            "peak_rss_mb": [round(p.peak_rss_mb(), 1) for p in processes],
            "all_running_s": started_s,
        }


IDLE_SECONDS = 3.0
"""How long the workers are watched with no chat writing: what the bots cost by being there."""


async def idle_cost(processes: list[Child], counts: list[Path], seconds: float) -> dict[str, float]:
    """The workers' database requests (`requests_in`) and CPU per second while no chat
    writes (each bot's inbox looks, pollers and leadership tries), summed over the workers."""
    await asyncio.sleep(1.0)  # the warm-up's last replies
    cpu0, client0 = sum(p.cpu_seconds() for p in processes), merge_counts(counts)
    await asyncio.sleep(seconds)
    cpu, client = sum(p.cpu_seconds() for p in processes) - cpu0, merge_counts(counts)
    requests = requests_in(client["counts"]) - requests_in(client0["counts"])
    return {"db_requests_per_s": requests / seconds, "cpu_ms_per_s": 1000 * cpu / seconds}


def requests_in(counts: dict[str, float]) -> float:
    """The database requests among a worker's counts (`bench.counted_bot`): PostgreSQL's
    requests sent, SQLite's store operations (its statements and thread hops are other
    units)."""
    return counts.get("pg", 0) + counts.get("sqlite_ops", 0)


async def add_bots(store: str, database: str, base_url: str, tokens: list[str]) -> None:
    """Add the bots of `tokens` to the store as `consultation-bot bots add` does (getMe,
    the token sealed under SECRET_KEY), before the workers start."""
    opened = await (PostgresStore.open(database) if store == "pg" else SqliteStore.open(database))
    try:
        keeper = BotKeeper(
            opened.bots,
            secret_key=SECRET_KEY,
            api_base_url=base_url,
            main_token=MAIN_TOKEN,
            roles=(),
            languages=(),
        )
        for token in tokens:
            await keeper.add(token, parse_profile({}))
    finally:
        await opened.close()


async def every_bot_running(
    processes: list[Child],
    bots: int,
    timeout: float = 120.0,  # noqa: ASYNC109
) -> bool:
    """Every process has logged each of its `bots` bots running (the deployment's bot's
    line, then one per added bot)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(p.tail(10_000).count(" is running") >= bots for p in processes):
            return True
        if any(p.popen.poll() is not None for p in processes):
            return False
        await asyncio.sleep(0.2)
    return False


async def warn_of_connections(admin: asyncpg.Connection, workers: int, bots: int) -> None:
    """Say so before the run when the workers may open more connections than the server
    has free (they are refused then, and the run fails)."""
    limit = int(await admin.fetchval("SHOW max_connections"))
    reserved = int(await admin.fetchval("SHOW superuser_reserved_connections"))
    busy = int(await admin.fetchval("SELECT count(*) FROM pg_stat_activity"))
    wanted = connections_at_most(bots) * workers
    free = limit - reserved - busy
    if wanted > free:
        print(
            f"many bots: {workers} workers × {bots} bots may open {wanted} connections; "
            f"the server has {free} free (max_connections {limit}): raise max_connections "
            "or run a smaller size",
            flush=True,
        )


def medians(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One run per kind (store, workers, bots) of `runs`, each figure the median of its
    kind's runs (in the order the kinds first ran)."""
    kinds: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for run in runs:
        kinds.setdefault((run["store"], run["workers"], run["bots"]), []).append(run)

    def median(values: list[Any]) -> Any:
        if all(isinstance(v, list) for v in values):  # per process: the largest's median
            return [statistics.median(max(v) for v in values)]
        if all(isinstance(v, dict) for v in values):
            return {k: median([v.get(k) for v in values]) for k in values[0]}
        numbers = [v for v in values if isinstance(v, int | float)]
        if not numbers or isinstance(values[0], bool):
            return values[0]
        return statistics.median(numbers)

    return [{key: median([run[key] for run in same]) for key in same[0]} for same in kinds.values()]


def many_bots_table(runs: list[dict[str, Any]]) -> str:
    """One column per run: store, workers and bots × chats each."""
    heads = [f"{r['store']}×{r['workers']} {r['bots']}×{r['chats'] // r['bots']}" for r in runs]
    rows: list[tuple[str, str, str]] = [
        ("throughput, rounds/s", "throughput", "{:.1f}"),
        ("complete p50, ms", "p50", "{:.1f}"),
        ("complete p99, ms", "p99", "{:.1f}"),
        ("workers' CPU per round, ms", "cpu_ms_per_round", "{:.2f}"),
        ("database requests per round", "db_per_round", "{:.1f}"),
        ("getUpdates per second (all bots)", "get_updates_per_s", "{:.1f}"),
        ("idle: database requests per second", "idle_db_requests_per_s", "{:.0f}"),
        ("idle: workers' CPU, ms per second", "idle_cpu_ms_per_s", "{:.0f}"),
        ("PostgreSQL connections after the load", "pg_connections", "{:.0f}"),
        ("  at most (deployment.md's count)", "pg_connections_at_most", "{:.0f}"),
        ("peak RSS per process, MB (largest)", "rss", "{:.0f}"),
        ("every bot running after, s", "all_running_s", "{:.1f}"),
    ]
    width = max(16, *(len(h) + 2 for h in heads))
    lines = [f"{'many bots':<40}" + "".join(f"{h:>{width}}" for h in heads)]
    for label, key, form in rows:
        cells = []
        for run in runs:
            value = {
                "p50": run["load"]["done"]["p50"],
                "p99": run["load"]["done"]["p99"],
                "rss": max(run["peak_rss_mb"]),
                "db_per_round": requests_in(run["db_requests_per_round"]) or None,
            }.get(key, run.get(key))
            cells.append(f"{'-' if value is None else form.format(value):>{width}}")
        lines.append(f"{label:<40}" + "".join(cells))
    return "\n".join(lines)
