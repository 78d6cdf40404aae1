"""The large-bodies phase: ten `/api/chat` requests at once, each carrying a 9.9 MB .txt
(base64 in JSON, a 13 MB body), against the bot's HTTP API.

Measured: the bot process's resident memory before, at its peak (VmHWM after the phase;
the warm-up's own peak is far lower) and after; how many requests were answered and how
many refused with SERVER_BUSY (503), and how long the phase took. Invariant: like every
phase, it stops every process it started.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import aiohttp

from bench.driver import Driver
from bench.procs import Child
from bench.runs import CONTENDERS, Bench, free_port

REQUESTS = 10
FILE_BYTES = 9_900_000


def _body(n: int) -> bytes:
    line = f"request {n}: line of a large plain-text file, repeated to fill it\n".encode()
    text = (line * (FILE_BYTES // len(line) + 1))[:FILE_BYTES]
    data = base64.b64encode(text).decode("ascii")
    attachment = {"name": f"large-{n}.txt", "mimeType": "text/plain", "data": data}
    return json.dumps({"message": "Summarize this file", "attachments": [attachment]}).encode()


async def large_bodies(bench: Bench) -> dict[str, Any]:
    """Ten large-attachment requests at once; the bot's memory around them."""
    tg, tg_port, model, model_port = bench._start_fakes()
    api_port = free_port()
    env = {
        **bench._api_env(tg_port, model_port, bench.scratch / "bodies.sqlite3", api_port),
        "API_RATE_LIMIT_PER_MINUTE": "0",
    }
    bot = bench.procs.start("bot-bodies", CONTENDERS["bot"], env, root=bench.bot_root)
    bodies = [_body(n) for n in range(REQUESTS)]
    url = f"http://127.0.0.1:{api_port}/api/chat"
    headers = {"Content-Type": "application/json"}
    try:
        async with aiohttp.ClientSession() as http, Driver(http, tg_port, model_port) as driver:
            if not await driver.wait_ready():
                raise RuntimeError(f"bot did not start polling:\n{bot.tail()}")
            await driver.sequential(10)  # warm-up
            async with http.post(url, json={"message": "warm-up"}) as response:
                await response.read()
            before = _rss_mb(bot)
            started = time.monotonic()

            async def one(body: bytes) -> int:
                async with http.post(url, data=body, headers=headers) as response:
                    await response.read()
                    return response.status

            statuses = await asyncio.gather(*(one(body) for body in bodies))
            took = time.monotonic() - started
            peak = bot.peak_rss_mb()
            await asyncio.sleep(1.0)
            after = _rss_mb(bot)
    finally:
        for child in (bot, tg, model):
            bench.procs.stop(child)
    return {
        "requests": REQUESTS,
        "file_bytes": FILE_BYTES,
        "body_bytes": len(bodies[0]),
        "answered": statuses.count(200),
        "busy": statuses.count(503),
        "other_statuses": sorted(s for s in statuses if s not in (200, 503)),
        "seconds": took,
        "bot_rss_mb_before": before,
        "bot_peak_rss_mb": peak,
        "bot_rss_mb_after": after,
    }


def _rss_mb(bot: Child) -> float:
    with open(f"/proc/{bot.pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def large_bodies_line(result: dict[str, Any]) -> str:
    others = f", other statuses {result['other_statuses']}" if result["other_statuses"] else ""
    return (
        f"large bodies ({result['requests']} /api/chat at once, each a "
        f"{result['file_bytes'] / 1e6:.1f} MB .txt in a {result['body_bytes'] / 1e6:.1f} MB "
        f"body): bot RSS {result['bot_rss_mb_before']:.0f} MB before, peak "
        f"{result['bot_peak_rss_mb']:.0f} MB, {result['bot_rss_mb_after']:.0f} MB after; "
        f"{result['answered']} answered, {result['busy']} refused busy (503){others}, in "
        f"{result['seconds']:.1f} s"
    )
