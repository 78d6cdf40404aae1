"""One benchmark run: fresh fakes, one contender process, every scenario, everything stopped.

Invariant: a run leaves no process behind — fakes and bot are stopped in a
`finally` — and measures only through the fakes (`bench.driver`) and /proc.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import sqlite3
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from bench.driver import Driver, Round, message_text
from bench.fakes import LONG_ANSWER_REQUEST, MAIN_TOKEN
from bench.procs import ROOT, Child, Processes
from bench.startup_imports import parse_importtime, retrieval_at_start
from core.prompting.context import approx_tokens

TOKEN = MAIN_TOKEN
CONTENDERS = {
    "bot": ["-m", "bot"],
    "reference": ["-m", "bench.reference_bot"],
    "minimal": ["-m", "bench.minimal_bot"],
    "floor": ["-m", "bench.floor_bot"],
}
"""What each contender runs: the product, the streaming relay, the minimal relay, the floor."""
KNOWLEDGE_TOP_K = 6
"""Passages a turn reads in the run with a knowledge base: the product's default, set."""


def percentiles(values: list[float]) -> dict[str, float]:
    """p50/p95/p99 in milliseconds (nearest rank)."""
    if not values:
        return {"p50": float("nan"), "p95": float("nan"), "p99": float("nan"), "n": 0}
    ordered = sorted(values)

    def rank(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))] * 1000

    return {"p50": rank(50), "p95": rank(95), "p99": rank(99), "n": len(ordered)}


def latencies(rounds: list[Round]) -> dict[str, Any]:
    return {
        "first": percentiles([r.first_latency for r in rounds]),
        "done": percentiles([r.done_latency for r in rounds]),
    }


class Bench:
    def __init__(
        self,
        procs: Processes,
        scratch: Path,
        *,
        seconds: float,
        chats: int,
        burst: int,
        idle_rounds: int,
        bot_root: Path = ROOT,
        questions: str = "on",
    ) -> None:
        self.procs = procs
        self.bot_root = bot_root  # the checkout whose `python -m bot` is measured
        self.questions = questions  # LLM_STRUCTURED_QUESTIONS of the bot measured
        self.scratch = scratch
        self.seconds = seconds
        self.chats = chats
        self.burst = burst
        self.idle_rounds = idle_rounds
        self.runs = 0

    def _start_fakes(self) -> tuple[Child, int, Child, int]:
        telegram = self.procs.start("fake-telegram", ["-m", "bench.fakes", "telegram"])
        model = self.procs.start("fake-model", ["-m", "bench.fakes", "model"])
        return telegram, self.procs.port_of(telegram), model, self.procs.port_of(model)

    def _env(self, tg_port: int, model_port: int, db: Path) -> dict[str, str]:
        return {
            "TELEGRAM_BOT_TOKEN": TOKEN,
            "TELEGRAM_API_BASE_URL": f"http://127.0.0.1:{tg_port}/bot",
            "OPENAI_API_KEY": "bench",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
            "LLM_MODEL": "fake-model",
            "DB_PATH": str(db),
            "USER_RATE_LIMIT_PER_MINUTE": "0",
            "DEFAULT_MAX_ROUNDS": "10",
            "MAX_ROUNDS_LIMIT": "20",
            "LLM_STRUCTURED_QUESTIONS": self.questions,
            # One model call per round, as the relays make: no fact-noting call after a
            # consultation, no memory in the system prompt.
            "MEMORY_ENABLED": "false",
        }

    def _api_env(self, tg_port: int, model_port: int, db: Path, api_port: int) -> dict[str, str]:
        """`_env` with the HTTP API listening on 127.0.0.1:`api_port`."""
        return {
            **self._env(tg_port, model_port, db),
            "API_ENABLED": "true",
            "API_HOST": "127.0.0.1",
            "API_PORT": str(api_port),
        }

    async def run(self, contender: str, knowledge: Path | None = None) -> dict[str, Any]:
        """All scenarios against one fresh process of `contender` (a key of CONTENDERS);
        `knowledge`: a SQLite file holding a knowledge base (and nothing else), which the
        product's run starts from (a copy), reading `KNOWLEDGE_TOP_K` passages a turn."""
        self.runs += 1
        began = time.monotonic()
        db = self.scratch / f"run{self.runs}-{contender}.sqlite3"
        env: dict[str, str] = {}
        if knowledge is not None:
            shutil.copyfile(knowledge, db)
            env["KNOWLEDGE_TOP_K"] = str(KNOWLEDGE_TOP_K)
        tg, tg_port, model, model_port = self._start_fakes()
        bot: Child | None = None
        try:
            bot = self.procs.start(
                f"{contender}{self.runs}",
                CONTENDERS[contender],
                {**self._env(tg_port, model_port, db), **env},
                root=self.bot_root if contender == "bot" else ROOT,
            )
            async with (
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http,
                Driver(http, tg_port, model_port) as driver,
            ):
                if not await driver.wait_ready():
                    raise RuntimeError(f"{contender} did not start polling:\n{bot.tail()}")
                result = await self._scenarios(driver, bot, fakes=(tg, model))
            result["rss_peak_mb"] = bot.peak_rss_mb()
        finally:
            for child in (bot, tg, model):
                if child is not None:
                    self.procs.stop(child)
        if contender == "bot":
            result["db"] = db_size(db)
        result["seconds"] = time.monotonic() - began
        return result

    async def _scenarios(
        self, driver: Driver, bot: Child, fakes: tuple[Child, Child]
    ) -> dict[str, Any]:
        # Warm-up: connection pools, lazy imports, SQLite pages.
        await driver.closed_loop(20, 1.0)
        idle = await driver.sequential(self.idle_rounds)
        watched = (bot, *fakes)
        asked0 = (await driver.model_formats())["next"]
        cpu0 = [child.cpu_seconds() for child in watched]
        calls0 = driver.method_counts.copy()
        loop = await driver.closed_loop(self.chats, self.seconds)
        loop_calls = driver.method_counts - calls0
        cpu, *fake_cpu = (child.cpu_seconds() - c0 for child, c0 in zip(watched, cpu0, strict=True))
        asked = (await driver.model_formats(since=asked0))["formats"]
        excerpts = await driver.model_excerpts(since=asked0)
        streamed = await self._streaming(driver)
        await driver.model_mode(latency=1.0)
        calls0 = driver.method_counts.copy()
        burst, burst_ok = await driver.burst(self.burst)
        await asyncio.sleep(0.5)  # late calls (none expected) still count
        burst_calls = driver.method_counts - calls0
        await driver.model_mode(latency=0.0)
        done = [r.done_at for r in burst if r.done_at is not None]
        return {
            "throughput": loop.per_second,
            "rounds_in_window": len(loop.rounds),
            "drained": loop.drained,
            "cpu_ms_per_round": 1000 * cpu / max(loop.completed_total, 1),
            "fakes_cpu_ms_per_round": 1000 * sum(fake_cpu) / max(loop.completed_total, 1),
            "idle": latencies(idle),
            "load": latencies(loop.rounds),
            "stream_first_text_after_first_token_ms": streamed,
            "burst_all_answered_s": (max(done) - burst[0].pushed_at) if burst_ok else None,
            "burst_answered": len(done),
            "requests_per_round": {
                "load": per_round(loop_calls, loop.completed_total),
                "burst": per_round(burst_calls, len(done)),
            },
            "model_formats_load": asked,
            "model_excerpts_load": excerpts,
        }

    async def floor(self) -> dict[str, Any]:
        """Idle latency of `bench.floor_bot`: the fakes' and loopback's share of a round."""
        tg, tg_port, model, model_port = self._start_fakes()
        env = self._env(tg_port, model_port, self.scratch / "unused.sqlite3")
        bot = self.procs.start("floor", CONTENDERS["floor"], env)
        try:
            async with aiohttp.ClientSession() as http, Driver(http, tg_port, model_port) as driver:
                if not await driver.wait_ready():
                    raise RuntimeError(f"floor bot did not start polling:\n{bot.tail()}")
                await driver.sequential(10)
                return {"idle": latencies(await driver.sequential(self.idle_rounds))}
        finally:
            for child in (bot, tg, model):
                self.procs.stop(child)

    async def _streaming(self, driver: Driver, chats: int = 5) -> dict[str, float]:
        """A model that streams for 3 s: first text in the chat vs the model's first token."""
        await driver.model_mode(stream_seconds=3.0)
        rounds = [Round(c, message_text(c, 0)) for c in (driver.new_chat() for _ in range(chats))]
        await driver.push(rounds)
        await driver.wait_until(lambda: all(r.done_at is not None for r in rounds), 20.0)
        await driver.model_mode(stream_seconds=0.0)
        firsts = (await driver.model_requests())["first_tokens"]
        gaps = []
        for r in rounds:
            token = next((f["monotonic"] for f in firsts if r.text in f["user"]), None)
            if token is not None and r.first_at is not None:
                gaps.append(r.first_at - token)
        return {"max": 1000 * max(gaps), "median": 1000 * statistics.median(gaps)} if gaps else {}

    async def startup_imports(self) -> dict[str, Any]:
        """`python -X importtime -m bot` with an empty knowledge base, until it polls and
        has answered three messages: the retrieval modules it imported
        (`bench.startup_imports`)."""
        tg, tg_port, model, model_port = self._start_fakes()
        env = self._env(tg_port, model_port, self.scratch / "imports.sqlite3")
        bot = self.procs.start(
            "bot-imports", ["-X", "importtime", *CONTENDERS["bot"]], env, root=self.bot_root
        )
        try:
            async with aiohttp.ClientSession() as http, Driver(http, tg_port, model_port) as driver:
                if not await driver.wait_ready():
                    raise RuntimeError(f"bot did not start polling:\n{bot.tail()}")
                await driver.sequential(3)  # a turn searches the (empty) knowledge base
        finally:
            for child in (bot, tg, model):
                self.procs.stop(child)
        return retrieval_at_start(parse_importtime(bot.log_path.read_text(errors="replace")))

    async def context_growth(self, rounds: int = 20) -> dict[str, dict[int, Any]]:
        """Tokens sent to the model at rounds 1, 5, 10, 20 of one long consultation, and
        how many of the user's messages so far each of those requests holds: whole, and
        at all (whole or shortened to its beginning and end)."""
        tg, tg_port, model, model_port = self._start_fakes()
        db = self.scratch / "context.sqlite3"
        bot = self.procs.start(
            "bot-context", CONTENDERS["bot"], self._env(tg_port, model_port, db), root=self.bot_root
        )
        try:
            async with aiohttp.ClientSession() as http, Driver(http, tg_port, model_port) as driver:
                if not await driver.wait_ready():
                    raise RuntimeError(f"bot did not start polling:\n{bot.tail()}")
                chat = driver.new_chat()
                await driver.one_round(chat, f"/rounds {rounds}")
                since = len((await driver.model_requests())["requests"])
                for n in range(rounds):
                    await driver.one_round(chat, long_message(n))
                bodies = (await driver.model_requests(since))["requests"]
        finally:
            for child in (bot, tg, model):
                self.procs.stop(child)
        tokens = [
            sum(approx_tokens(str(m.get("content", ""))) for m in b["messages"]) for b in bodies
        ]
        shown = (n for n in (1, 5, 10, 20) if n <= len(tokens))
        kept: dict[int, Any] = {}
        for n in (1, 5, 10, 20):
            if n <= len(bodies):
                sent = "\n".join(str(m.get("content", "")) for m in bodies[n - 1]["messages"])
                whole = sum(long_message(i) in sent for i in range(n))
                present = sum(long_message(i)[:80] in sent for i in range(n))
                kept[n] = f"{present}/{n} ({whole} whole)"
        return {"tokens": {n: tokens[n - 1] for n in shown}, "user_messages_kept": kept}

    async def long_answer(
        self, chars: int, piece: int, cap: int | None = None, give_up_after: float = 180.0
    ) -> dict[str, Any]:
        """One `chars`-character answer streamed in `piece`-character chunks, as fast as the
        fake can send them, while other chats are served and `/healthz` is timed.

        The worst `/healthz` time is the longest the bot's event loop was blocked; the
        other chats' reply times show what users of other chats felt meanwhile.
        """
        tg, tg_port, model, model_port = self._start_fakes()
        api_port = free_port()
        env = {
            **self._env(tg_port, model_port, self.scratch / "long.sqlite3"),
            "API_ENABLED": "true",
            "API_HOST": "127.0.0.1",
            "API_PORT": str(api_port),
            # By default the whole answer streams: the phase measures streaming, not the cap.
            "MAX_ANSWER_CHARS": str(cap or chars + 1000),
        }
        bot = self.procs.start("bot-long", CONTENDERS["bot"], env, root=self.bot_root)
        try:
            async with aiohttp.ClientSession() as http, Driver(http, tg_port, model_port) as driver:
                if not await driver.wait_ready():
                    raise RuntimeError(f"bot did not start polling:\n{bot.tail()}")
                await driver.sequential(10)  # warm-up
                quiet = asyncio.Event()
                calm = asyncio.create_task(probe_health(http, api_port, quiet))
                await asyncio.sleep(1.0)
                quiet.set()
                idle_samples = await calm
                lag_before = await loop_lag_buckets(http, api_port)
                await driver.model_mode(long_chars=chars, long_piece=piece)
                long = Round(driver.new_chat(), f"{LONG_ANSWER_REQUEST}: explain everything")
                done = asyncio.Event()
                await driver.push([long], lambda _: done.set())
                probe = asyncio.create_task(probe_health(http, api_port, done))
                others: list[Round] = []
                chats = [driver.new_chat() for _ in range(3)]
                deadline = time.monotonic() + give_up_after
                while not done.is_set() and time.monotonic() < deadline:
                    chat = chats[len(others) % len(chats)]
                    others.append(await driver.one_round(chat, message_text(chat, len(others))))
                    await asyncio.sleep(0.02)
                finished = await driver.wait_until(lambda: long.done_at is not None, 0.1)
                done.set()
                samples = await probe
                stall = worst_stall(lag_before, await loop_lag_buckets(http, api_port))
                await driver.model_mode(long_chars=0)
        finally:
            for child in (bot, tg, model):
                self.procs.stop(child)
        return {
            "chars": chars,
            "piece": piece,
            "max_answer_chars": cap or chars + 1000,
            "answered": finished,
            "answer_s": long.done_latency if finished else None,
            "loop_stall_ms": stall,
            "healthz_idle_max_ms": 1000 * max(idle_samples, default=float("nan")),
            "healthz_max_ms": 1000 * max(samples, default=float("nan")),
            "healthz": percentiles(samples),
            "other_chats": latencies(others) if others else {},
            "other_chats_max_ms": 1000 * max((r.done_latency for r in others), default=0.0),
        }


async def loop_lag_buckets(http: aiohttp.ClientSession, port: int) -> dict[float, float]:
    """The bot's event-loop lag histogram: cumulative count per bucket bound, in seconds."""
    async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
        text = await response.text()
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith("consult_event_loop_lag_seconds_bucket{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float(bound)] = float(line.rsplit(" ", 1)[1])
    return buckets


def worst_stall(before: dict[float, float], after: dict[float, float]) -> dict[str, float] | None:
    """The bucket the worst lag between two readings fell in: {"above_ms", "at_most_ms"}.

    The bot measures its own loop (a timer 100 times a second), so unlike a /healthz
    round trip this leaves out the network, the probe and the other processes' CPU.
    """
    bounds = sorted(after)
    if not bounds:
        return None
    total = after[bounds[-1]] - before.get(bounds[-1], 0.0)
    previous = 0.0
    for bound in bounds:
        if after[bound] - before.get(bound, 0.0) >= total:
            return {"above_ms": 1000 * previous, "at_most_ms": 1000 * bound}
        previous = bound
    return None


async def probe_health(
    http: aiohttp.ClientSession, port: int, done: asyncio.Event, gap: float = 0.005
) -> list[float]:
    """Time `GET /healthz` back to back (`gap` apart) until `done`: each is a loop-lag sample.

    The handler does almost nothing (a store ping), so a slow answer means the bot's event
    loop was busy elsewhere for about that long.
    """
    url = f"http://127.0.0.1:{port}/healthz"
    samples: list[float] = []
    while not done.is_set():
        started = time.monotonic()
        async with http.get(url) as response:
            await response.read()
        samples.append(time.monotonic() - started)
        await asyncio.sleep(gap)
    return samples


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def per_round(calls: Counter[str], rounds: int) -> dict[str, float]:
    """Bot API requests of each kind per round, long polls left out."""
    return {
        method: round(count / max(rounds, 1), 2)
        for method, count in sorted(calls.items())
        if method != "getUpdates"
    }


def long_message(n: int) -> str:
    """About 1,500 characters, so the history passes the budget within ten rounds."""
    return f"Round {n}: " + ("Here are more details about our situation and constraints. " * 25)


def db_size(path: Path) -> dict[str, float]:
    """Consultations stored and the file size with its WAL folded in (after a checkpoint)."""
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        count = connection.execute("SELECT count(*) FROM consultations").fetchone()[0]
        messages = connection.execute("SELECT count(*) FROM messages").fetchone()[0]
    size = path.stat().st_size
    wal = path.with_name(path.name + "-wal")
    size += wal.stat().st_size if wal.exists() else 0
    return {
        "consultations": count,
        "messages": messages,
        "bytes": size,
        "mb_per_1000_consultations": size / 1e6 / max(count, 1) * 1000,
    }
