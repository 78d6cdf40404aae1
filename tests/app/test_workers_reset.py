"""A /reset at another worker than the one running the chat's turn, with two real
`python -m bot` workers on one PostgreSQL schema (webhook mode, the shared inbox).

Each worker talks to a model server of its own, so the test knows which worker runs the
turn (either may claim the chat from the inbox) and sends /reset to the other one. The
reset must not wait for the held model call: it ends the consultation at once, and the
worker running the turn hears of it and stops the turn there, so no reply of it is ever
stored or sent and the chat's next message goes on, exactly as when the reset reaches the
worker running the turn. Helpers: tests/cluster_harness.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer, text_of
from i18n.translate import t
from tests.cluster_harness import (
    PATH,
    Cluster,
    Replies,
    chat_ids,
    cluster,
    free_port,
    histories,
    post_update,
    worker_env,
)
from tests.postgres import postgres_url  # noqa: F401  (fixture)

WAIT = 30  # seconds: the bound on every wait; a wait that runs out fails the test


@pytest.fixture
async def second_model_server() -> AsyncIterator[FakeModelServer]:
    """The second worker's model server (the first worker uses `model_server`)."""
    server = FakeModelServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def start_workers(
    workers: Cluster, bot_api: FakeBotApi, models: list[FakeModelServer], database_url: str
) -> list[str]:
    """One webhook worker per model server, each on its own port; their webhook URLs."""
    urls = []
    for model in models:
        port = free_port()
        await workers.start(worker_env(workers.home, bot_api, model, database_url, port=port), port)
        urls.append(f"http://127.0.0.1:{port}{PATH}")
    await workers.running()
    return urls


async def first_asked(models: list[FakeModelServer]) -> int:
    """The index of the first model server to receive a request (its worker runs the turn)."""
    waits = [asyncio.ensure_future(m.wait_requests(1, timeout=WAIT)) for m in models]
    try:
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    for task in done:
        task.result()  # a TimeoutError: no worker asked the model
    [asked] = [n for n, m in enumerate(models) if m.requests]
    return asked


def conversation(body: dict[str, Any]) -> list[str]:
    """The non-system messages' texts of one model request."""
    return [text_of(m["content"]) for m in body["messages"] if m["role"] != "system"]


def texts_to(bot_api: FakeBotApi, chat_id: int) -> list[str]:
    """Every text the bot put into the chat, whatever the method (message, edit, draft)."""
    return [
        str(call.params["text"])
        for call in bot_api.calls
        if str(call.params.get("chat_id")) == str(chat_id) and "text" in call.params
    ]


async def consultation_statuses(database_url: str, chat_key: str) -> list[str]:
    db = await asyncpg.connect(database_url)
    try:
        rows = await db.fetch(
            "SELECT status FROM consultations WHERE chat_key = $1 ORDER BY created_at, id",
            chat_key,
        )
    finally:
        await db.close()
    return [row["status"] for row in rows]


async def test_reset_at_another_worker_stops_the_turn_there_and_ends_the_consultation(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    second_model_server: FakeModelServer,
) -> None:
    """The model holds the turn's call; /reset at the other worker is confirmed while it
    is held, and the worker running the turn stops it without waiting for the model. The
    turn's reply reaches neither the chat nor the history (the consultation is 'reset',
    its user message alone), and the next message starts a new consultation whose model
    request carries only that message."""
    models = [model_server, second_model_server]
    held = asyncio.Event()
    for model in models:
        model.hold = held
    [chat] = chat_ids(1)
    first, second = "Plan my vegetable garden", "Now plan a flower bed"
    replies = Replies(bot_api)
    async with cluster(tmp_path) as workers, aiohttp.ClientSession() as http:
        urls = await start_workers(workers, bot_api, models, postgres_url)
        update = bot_api.text_message(chat, first, user_id=chat)
        assert await post_update(http, urls[0], update) == 200
        turn = await first_asked(models)  # that worker is in the turn, its model call held
        runner, other = workers.workers[turn], urls[1 - turn]

        reset = bot_api.text_message(chat, "/reset", user_id=chat)
        assert await post_update(http, other, reset) == 200
        await replies.first_line(chat, t("en", "reset_done"), timeout=WAIT)
        assert not held.is_set()  # confirmed while the turn's model call was still held
        assert await consultation_statuses(postgres_url, f"tg:{chat}") == ["reset"]

        await runner.bot.logged(f"of chat tg:{chat} stopped by a command", timeout=WAIT)
        assert not held.is_set()  # stopped while its model call was still held
        held.set()
        assert not any(f"Reply to: {first}" in text for text in texts_to(bot_api, chat))

        update = bot_api.text_message(chat, second, user_id=chat)
        assert await post_update(http, urls[0], update) == 200
        answer = await replies.first_line(chat, f"Reply to: {second}", timeout=WAIT)
        assert "Traceback" not in workers.logs(), workers.logs()
    assert answer.text.endswith(t("en", "round_label", round=1, max_rounds=3))
    assert not any(f"Reply to: {first}" in text for text in texts_to(bot_api, chat))
    asked = [conversation(body) for model in models for body in model.requests]
    assert sorted(asked) == sorted([[first], [second]])  # the new one asked without the old
    assert await consultation_statuses(postgres_url, f"tg:{chat}") == ["reset", "active"]
    [ended, started] = (await histories(postgres_url))[f"tg:{chat}"]
    assert ended == [("user", first)]  # the superseded reply was not stored
    assert [role for role, _ in started] == ["user", "assistant"]
    assert started[0] == ("user", second)
    assert started[1][1].startswith(f"Reply to: {second}")
    print(f"\nthe turn ran on {runner.name}; /reset went to the other worker")
