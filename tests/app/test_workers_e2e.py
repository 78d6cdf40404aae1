"""`python -m bot` as a worker on PostgreSQL (DATABASE_URL, webhook mode): updates go through
the shared inbox, so one accepted by another worker is answered here too, in the chat's order.

The process gets a clean environment (see tests/app/test_entrypoint.py) and talks to the fake Bot
API and model server of the test; its database is the test's own PostgreSQL schema.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest_asyncio

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from storage.postgres.cluster.inbox import PostgresInbox
from tests.app.test_entrypoint import BotProcess, fakes_env
from tests.postgres import postgres_url  # noqa: F401  (fixture)

USER = 601
SECRET = "e2e-webhook-secret"
PATH = "/telegram/webhook"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest_asyncio.fixture
async def worker(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> AsyncIterator[tuple[BotProcess, int]]:
    """One worker process in webhook mode on the test's schema; killed if still running."""
    port = free_port()
    env = fakes_env(
        tmp_path,
        bot_api,
        model_server,
        DATABASE_URL=postgres_url,
        WEBHOOK_URL="https://bot.example.com" + PATH,
        WEBHOOK_SECRET=SECRET,
        API_HOST="127.0.0.1",
        API_PORT=str(port),
        USER_RATE_LIMIT_PER_MINUTE="0",
    )
    running = await BotProcess.launch(env, tmp_path / "worker.log", tmp_path)
    process = running.process
    try:
        yield running, port
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def post(port: int, update: dict[str, Any]) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"http://127.0.0.1:{port}{PATH}",
            json=update,
            headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
        ) as response,
    ):
        return response.status


async def scrape_until(port: int, line: str, timeout: float = 20) -> str:  # noqa: ASYNC109
    """The worker's /metrics once it shows `line` (scraped every 50 ms)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with aiohttp.ClientSession() as http:
        while True:
            async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
                metrics = await response.text()
            if line in metrics.splitlines():
                return metrics
            if loop.time() > deadline:
                raise AssertionError(f"{line!r} never in /metrics:\n{metrics}")
            await asyncio.sleep(0.05)


async def test_a_chat_is_answered_in_order_whichever_worker_accepted_its_updates(
    worker: tuple[BotProcess, int],
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """Round 1 through this worker's webhook, round 2 queued by another worker (straight into
    the inbox), round 3 through the webhook again: three replies, in order, each answering
    its own message with the history before it; /metrics counts three claims; SIGTERM
    ends the worker with 0."""
    process, port = worker
    await process.logged("is running")
    messages = ["Plan a trip to Rome", "Four days in May", "Museums over food"]
    updates = [bot_api.text_message(USER, text, user_id=USER) for text in messages]
    assert await post(port, updates[0]) == 200
    other = await PostgresInbox.open(postgres_url)  # the worker has migrated the schema
    try:
        assert await other.put(updates[1]["update_id"], f"tg:{USER}", json.dumps(updates[1]))
    finally:
        await other.close()
    assert await post(port, updates[2]) == 200
    assert await post(port, updates[2]) == 200  # a redelivery: answered, not handled again
    await bot_api.wait_for(
        lambda c: c.method == "sendMessage" and "Final answer" in c.params.get("text", ""),
        timeout=30,
    )
    replies = [t for t in bot_api.sent_texts(USER) if t.startswith("Reply to:")]
    assert [r.split("\n")[0] for r in replies] == [f"Reply to: {m}" for m in messages]
    users = [m["content"] for m in model_server.requests[-1]["messages"] if m["role"] == "user"]
    assert users == messages
    assert len(model_server.requests) == 3
    metrics = await scrape_until(port, "consult_inbox_depth 0.0")  # the last row deleted
    assert "consult_inbox_claim_seconds_count 3.0" in metrics  # each update came through it
    process.process.send_signal(signal.SIGTERM)
    assert await process.exited() == 0, process.log.read_text()
    assert "Traceback" not in process.log.read_text()
