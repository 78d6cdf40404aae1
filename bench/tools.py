"""The tool-call phase: what one tool call adds to a turn, beyond the tool's own time.

One product process with the fake MCP server (`fakes.mcp_server`, over stdio) configured
answers `ROUNDS` idle rounds twice, alternating in blocks: with the fake model answering
at once, and with it first calling `tools__wait` (`TOOL_MS` milliseconds, the tool's own
time) and answering once it has read the result. Both kinds of round offer the tools and
are asked in text (`LLM_STRUCTURED_QUESTIONS=off`), so the difference is the tool call:
the model's second call, the MCP round trip, and the tool's sleep. Measured: each kind's
p50 and p90 of the reply's completion, the tool's own time (how long the fake really
slept, which it says in its result: the model's next request carries it), and the
overhead (the p50 difference minus the tool's median own time), against the issue's
target of at most 5 ms; and the same difference less the call as the bot timed it (the
`ms` stored with each reply's tool use: the MCP round trip and the server's own handling
too), which leaves the bot's own work: the second model call and the tool loop.
Invariant: like every phase, it stops every process it started.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import statistics
import sys
from pathlib import Path
from typing import Any

import aiohttp

from bench.driver import Driver
from bench.procs import ROOT
from bench.runs import CONTENDERS, Bench

ROUNDS = 60
"""Rounds of each kind (in blocks of `BLOCK`, alternating, so drift hits both alike)."""
BLOCK = 10
TOOL_MS = 20
"""How long the tool itself takes (the fake's `wait` sleeps this long)."""
TOOL = "tools__wait"
SLEPT = re.compile(r"slept ([0-9.]+) ms")
TARGET_MS = 5.0


async def tool_overhead(bench: Bench) -> dict[str, Any]:
    """The product with a tool server, rounds with and without a tool call."""
    tg, tg_port, model, model_port = bench._start_fakes()
    server = {
        "command": sys.executable,
        "args": ["-m", "fakes.mcp_server", "--stdio"],
        "cwd": str(ROOT),
    }
    env = {
        **bench._env(tg_port, model_port, bench.scratch / "tools.sqlite3"),  # `db` below
        "MCP_SERVERS": json.dumps({"tools": server}),
        "MCP_TOOLS_ALLOW": "tools.wait",
        "LLM_STRUCTURED_QUESTIONS": "off",
    }
    db = bench.scratch / "tools.sqlite3"
    bot = bench.procs.start("bot-tools", CONTENDERS["bot"], env, root=bench.bot_root)
    done: dict[str, list[float]] = {"plain": [], "tool": []}
    try:
        async with (
            aiohttp.ClientSession() as http,
            Driver(http, tg_port, model_port) as driver,
        ):
            if not await driver.wait_ready():
                raise RuntimeError(f"bot did not start polling:\n{bot.tail()}")
            arguments = json.dumps({"ms": TOOL_MS})
            for kind in ("plain", "tool"):  # warm-up: the tool server's first call
                await driver.model_mode(tool_call=TOOL if kind == "tool" else "")
                await driver.sequential(5, pause=0.05)
            asked0 = (await driver.model_requests())["requests"]
            for _ in range(ROUNDS // BLOCK):
                for kind in ("plain", "tool"):
                    call = TOOL if kind == "tool" else ""
                    await driver.model_mode(tool_call=call, tool_arguments=arguments)
                    rounds = await driver.sequential(BLOCK, pause=0.05)
                    done[kind] += [r.done_latency for r in rounds]
            asked = (await driver.model_requests(since=len(asked0)))["requests"]
            await driver.model_mode(tool_call="")
    finally:
        for child in (bot, tg, model):
            bench.procs.stop(child)
    results = {kind: _summary(values) for kind, values in done.items()}
    slept = [float(m) for body in asked for m in SLEPT.findall(json.dumps(body))]
    own = statistics.median(slept) if slept else float("nan")
    overhead = results["tool"]["p50_ms"] - results["plain"]["p50_ms"] - own
    timed = _timed_calls(db)
    call_ms = statistics.median(timed) if timed else float("nan")
    return {
        "rounds": ROUNDS,
        "tool_ms": TOOL_MS,
        "tool_own_p50_ms": own,
        **results,
        "model_requests": len(asked),
        "tool_results_sent": sum(
            1 for body in asked if any(m.get("role") == "tool" for m in body.get("messages", []))
        ),
        "overhead_p50_ms": overhead,
        "call_as_timed_p50_ms": call_ms,
        "overhead_beyond_call_p50_ms": overhead + own - call_ms,
        "target_ms": TARGET_MS,
    }


def _timed_calls(db: Path) -> list[int]:
    """The `ms` of every tool use stored with a reply (whole milliseconds)."""
    with contextlib.closing(sqlite3.connect(db)) as connection:
        rows = connection.execute(
            "SELECT tool_uses FROM messages WHERE tool_uses IS NOT NULL"
        ).fetchall()
    return [use["ms"] for (stored,) in rows for use in json.loads(stored)]


def _summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "p50_ms": 1000 * statistics.median(ordered),
        "p90_ms": 1000 * ordered[int(0.9 * (len(ordered) - 1))],
    }


def tool_line(result: dict[str, Any]) -> str:
    verdict = "met" if result["overhead_p50_ms"] <= result["target_ms"] else "NOT met"
    return (
        f"one tool call ({result['tool_ms']} ms tool, {result['tool_own_p50_ms']:.1f} ms of its "
        f"own at p50, stdio MCP, {result['rounds']} rounds each): reply p50 "
        f"{result['plain']['p50_ms']:.1f} ms without, "
        f"{result['tool']['p50_ms']:.1f} ms with (p90 {result['plain']['p90_ms']:.1f} / "
        f"{result['tool']['p90_ms']:.1f}); the call adds {result['overhead_p50_ms']:.1f} ms "
        f"beyond the tool's own time (target ≤ {result['target_ms']:.0f} ms: {verdict}), "
        f"{result['overhead_beyond_call_p50_ms']:.1f} ms beyond the call as the bot timed it "
        f"({result['call_as_timed_p50_ms']:.0f} ms); "
        f"{result['tool_results_sent']} of {result['model_requests']} model requests "
        "carried a tool result"
    )
