"""The hostile-documents phase: six files that cost a reader far more than their size
(`fakes.hostile_documents`), each in a chat of its own, while other chats keep talking
and a small .txt arrives in one more chat.

Measured: the worst event-loop stall (the bot's own lag histogram, via /metrics), the
bot process's resident memory (sampled, and its peak) and its reader processes', how
long each hostile chat waited for its answer (a refusal or a cut notice), how long the
.txt took, the other chats' round times, and how long the bot took to exit on SIGTERM
with readers busy. Invariant: like every phase, it stops every process it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench.driver import Driver, Round, message_text
from bench.procs import Child
from bench.runs import (
    CONTENDERS,
    Bench,
    free_port,
    latencies,
    loop_lag_buckets,
    worst_stall,
)
from fakes.hostile_documents import (
    DOCX_MIME,
    costly_pages_pdf,
    inflating_pdf,
    million_cell_docx,
    paragraph_flood_docx,
    repeated_page_pdf,
)

PDF_MIME = "application/pdf"
FILES: list[tuple[str, str, Callable[[], bytes]]] = [
    ("pages-a.pdf", PDF_MIME, costly_pages_pdf),  # past the deadline
    ("pages-b.pdf", PDF_MIME, costly_pages_pdf),
    ("dense.pdf", PDF_MIME, repeated_page_pdf),  # 200,000 characters a page: cut
    ("inflate.pdf", PDF_MIME, inflating_pdf),  # a page inflating to 70 MB
    ("cells.docx", DOCX_MIME, million_cell_docx),  # a million table cells
    ("flood.docx", DOCX_MIME, paragraph_flood_docx),  # unpacks to 195 MB
]


async def hostile_documents(bench: Bench, give_up_after: float = 300.0) -> dict[str, Any]:
    """Six hostile files in six chats beside three talking chats and one .txt."""
    tg, tg_port, model, model_port = bench._start_fakes()
    api_port = free_port()
    env = bench._api_env(tg_port, model_port, bench.scratch / "hostile.sqlite3", api_port)
    bot = bench.procs.start("bot-hostile", CONTENDERS["bot"], env, root=bench.bot_root)
    files = [(name, mime, make()) for name, mime, make in FILES]
    try:
        async with aiohttp.ClientSession() as http, Driver(http, tg_port, model_port) as driver:
            if not await driver.wait_ready():
                raise RuntimeError(f"bot did not start polling:\n{bot.tail()}")
            await driver.sequential(10)  # warm-up
            lag_before = await loop_lag_buckets(http, api_port)
            memory = _MemorySampler(bot)
            sampling = asyncio.create_task(memory.run())
            started = time.monotonic()
            hostile = [
                await _document_round(http, driver, tg_port, name, data, mime)
                for name, mime, data in files
            ]
            text = await _document_round(
                http, driver, tg_port, "notes.txt", b"Budget: 1200 EUR\n", "text/plain"
            )
            others: list[Round] = []
            chats = [driver.new_chat() for _ in range(3)]
            deadline = started + give_up_after
            while time.monotonic() < deadline and not all(r.done_at for r in [*hostile, text]):
                chat = chats[len(others) % len(chats)]
                others.append(await driver.one_round(chat, message_text(chat, len(others))))
                await asyncio.sleep(0.05)
            all_handled_s = time.monotonic() - started
            stall = worst_stall(lag_before, await loop_lag_buckets(http, api_port))
            memory.stop()
            await sampling
            answers = await _first_answers(http, tg_port, [r.chat_id for r in hostile])
            # Busy readers again, then SIGTERM to the bot alone: how long until it exits.
            for name, mime, data in files[:2]:
                await _document_round(http, driver, tg_port, name, data, mime)
            await asyncio.sleep(1.0)
            stop_s = await _exit_after_sigterm(bot)
    finally:
        for child in (bot, tg, model):
            bench.procs.stop(child)
    return {
        "files": {
            name: {
                "bytes": len(data),
                "answered_s": r.done_latency if r.done_at else None,
                "answer": answers.get(r.chat_id, "")[:80],
            }
            for (name, _, data), r in zip(files, hostile, strict=True)
        },
        "all_handled_s": all_handled_s,
        "txt_answered_s": text.done_latency if text.done_at else None,
        "loop_stall_ms": stall,
        "bot_rss_mb_max": memory.bot_max,
        "bot_rss_mb_after": memory.bot_last,
        "bot_peak_rss_mb": bot.peak_rss_mb() if bot.popen.poll() is None else memory.hwm,
        "readers_rss_mb_max": memory.readers_max,
        "other_chats": latencies(others) if others else {},
        "other_chats_max_ms": 1000 * max((r.done_latency for r in others), default=0.0),
        "exit_after_sigterm_s": stop_s,
    }


async def _document_round(
    http: aiohttp.ClientSession, driver: Driver, tg_port: int, name: str, data: bytes, mime: str
) -> Round:
    """Store `data` in the fake and push a message carrying it in a new chat, timed."""
    url = f"http://127.0.0.1:{tg_port}/_bench/document"
    async with http.post(url, params={"name": name, "mime": mime}, data=data) as response:
        media = await response.json()
    chat = driver.new_chat()
    round_ = Round(chat, "")
    driver.track(round_)
    items = [{"chat_id": chat, "user_id": chat, "text": None, "media": media}]
    async with http.post(f"http://127.0.0.1:{tg_port}/_control/updates", json=items) as response:
        [pushed] = await response.json()
    round_.pushed_at = pushed["monotonic"]
    return round_


async def _first_answers(
    http: aiohttp.ClientSession, tg_port: int, chats: list[int]
) -> dict[int, str]:
    """The first message each chat got (a refusal or a cut notice)."""
    url = f"http://127.0.0.1:{tg_port}/_control/calls"
    async with http.get(url, params={"method": "sendMessage"}) as response:
        calls = (await response.json())["calls"]
    first: dict[int, str] = {}
    for call in calls:
        chat = int(call["params"].get("chat_id", 0))
        if chat in chats and chat not in first and call.get("status") == 200:
            first[chat] = str(call["params"].get("text", ""))
    return first


async def _exit_after_sigterm(bot: Child, wait: float = 60.0) -> float | None:
    """Seconds from SIGTERM (to the bot alone, not its readers) to its exit."""
    started = time.monotonic()
    os.kill(bot.pid, signal.SIGTERM)
    try:
        await asyncio.to_thread(bot.popen.wait, wait)
    except Exception:  # still running: the phase reports it; the caller kills it
        return None
    return time.monotonic() - started


class _MemorySampler:
    """Resident memory of the bot and of its reader processes, ten times a second."""

    def __init__(self, bot: Child) -> None:
        self.bot = bot
        self.bot_max = self.bot_last = self.readers_max = self.hwm = 0.0
        self._running = True

    def stop(self) -> None:
        self._running = False

    async def run(self) -> None:
        while self._running:
            with contextlib.suppress(OSError):
                self.bot_last = _status_mb(Path(f"/proc/{self.bot.pid}"), "VmRSS")
                self.hwm = _status_mb(Path(f"/proc/{self.bot.pid}"), "VmHWM")
                self.bot_max = max(self.bot_max, self.bot_last)
                readers = sum(_status_mb(p, "VmRSS") for p in _children(self.bot.pid))
                self.readers_max = max(self.readers_max, readers)
            await asyncio.sleep(0.1)


def _children(pid: int) -> list[Path]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                status = (entry / "status").read_text()
                if f"\nPPid:\t{pid}\n" in status:
                    found.append(entry)
    return found


def _status_mb(proc: Path, field: str) -> float:
    for line in (proc / "status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def hostile_line(result: dict[str, Any]) -> str:
    stall = result.get("loop_stall_ms")
    shown = f"{stall['above_ms']:g}-{stall['at_most_ms']:g} ms" if stall else "not measured"
    others = result["other_chats"].get("done", {})
    handled = ", ".join(
        f"{name} {_seconds(file['answered_s'])}" for name, file in result["files"].items()
    )
    return (
        f"hostile documents (6 files in 6 chats beside 3 talking chats and a .txt): worst "
        f"event-loop stall {shown}; bot RSS max {result['bot_rss_mb_max']:.0f} MB (after "
        f"{result['bot_rss_mb_after']:.0f} MB), readers' RSS max "
        f"{result['readers_rss_mb_max']:.0f} MB; all handled in {result['all_handled_s']:.1f} s "
        f"({handled}); the .txt answered in {_seconds(result['txt_answered_s'])}; other chats: "
        f"{others.get('n', 0)} rounds, p50 {others.get('p50', float('nan')):.1f} ms, worst "
        f"{result['other_chats_max_ms']:.0f} ms; exit after SIGTERM with readers busy "
        f"{_seconds(result['exit_after_sigterm_s'])}"
    )


def _seconds(value: float | None) -> str:
    return "not answered" if value is None else f"{value:.1f} s"
