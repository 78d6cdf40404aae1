"""The tool-call phase: what one tool call adds to a turn, beyond the tool's own time.

One product process with the fake MCP server (`fakes.mcp_server`, over stdio) configured
answers `ROUNDS` idle rounds twice, alternating in blocks: with the fake model answering
at once, and with it first calling `tools__wait` (`TOOL_MS` milliseconds, the tool's own
time) and answering once it has read the result. Both kinds of round offer the tools and
are asked in text (`LLM_STRUCTURED_QUESTIONS=off`), so the difference is the tool call:
the model's second call, the MCP round trip, and the tool's sleep. Measured: each kind's
p50 and p90 of the reply's completion, and the overhead (p50 difference minus `TOOL_MS`),
against the issue's target of at most 5 ms. Invariant: like every phase, it stops every
process it started.
"""

from __future__ import annotations

import json
import statistics
import sys
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
        **bench._env(tg_port, model_port, bench.scratch / "tools.sqlite3"),
        "MCP_SERVERS": json.dumps({"tools": server}),
        "MCP_TOOLS_ALLOW": "tools.wait",
        "LLM_STRUCTURED_QUESTIONS": "off",
    }
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
    overhead = results["tool"]["p50_ms"] - results["plain"]["p50_ms"] - TOOL_MS
    return {
        "rounds": ROUNDS,
        "tool_ms": TOOL_MS,
        **results,
        "model_requests": len(asked),
        "tool_results_sent": sum(
            1 for body in asked if any(m.get("role") == "tool" for m in body.get("messages", []))
        ),
        "overhead_p50_ms": overhead,
        "target_ms": TARGET_MS,
    }


def _summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "p50_ms": 1000 * statistics.median(ordered),
        "p90_ms": 1000 * ordered[int(0.9 * (len(ordered) - 1))],
    }


def tool_line(result: dict[str, Any]) -> str:
    verdict = "met" if result["overhead_p50_ms"] <= result["target_ms"] else "NOT met"
    return (
        f"one tool call ({result['tool_ms']} ms tool, stdio MCP, {result['rounds']} rounds "
        f"each): reply p50 {result['plain']['p50_ms']:.1f} ms without, "
        f"{result['tool']['p50_ms']:.1f} ms with (p90 {result['plain']['p90_ms']:.1f} / "
        f"{result['tool']['p90_ms']:.1f}); the call adds {result['overhead_p50_ms']:.1f} ms "
        f"beyond the tool's own time (target ≤ {result['target_ms']:.0f} ms: {verdict}); "
        f"{result['tool_results_sent']} of {result['model_requests']} model requests "
        "carried a tool result"
    )
