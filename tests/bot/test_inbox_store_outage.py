"""A store outage while the shared inbox works a chat loses no message: the update whose
handling met the unavailable store (the turn's store write, or the shared message limit
checked before it) stays in the inbox, is handled again after a back-off without the user
sending it again, and is answered exactly once when the store is back; the chat is told
once that its message is kept; failed handlings in an outage use up no attempt, so even
more of them than INBOX_MAX_ATTEMPTS never dead-letter the update.

The real Application and inbox worker, the fake Bot API and model; the store and the
shared state reach PostgreSQL through a relay the test cuts, the inbox directly (its
connections stay up, as in a partial outage).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio
from telegram import Update

from app.bot_edge import shared_state
from app.runtime import open_runtime
from bot.app import build_application
from bot.updates.inbox import InboxWorker
from fakes.bot_api import Call, FakeBotApi
from fakes.model_server import FakeModelServer
from fakes.tcp_relay import TcpRelay
from storage.postgres.cluster.inbox import PostgresInbox
from storage.postgres.cluster.locks import PostgresChatLocks
from tests.bot_harness import FOOTERS, bot_settings, conversation
from tests.postgres import postgres_url  # noqa: F401  (fixture)
from tests.waiting import until

WAIT = 20.0
MAX_ATTEMPTS = 2
CHAT = 4242
KEPT = "Your message is kept"
SEND_AGAIN = "send the same message again"


@dataclass
class KeptBot:
    worker: InboxWorker
    relay: TcpRelay
    api: FakeBotApi
    url: str  # the database, not through the relay
    handlings: list[int]  # update ids, as each handling started


@pytest_asyncio.fixture(params=[0, 100], ids=["turn-store", "shared-limit"])
async def kept_bot(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    postgres_url: str,  # noqa: F811
) -> AsyncIterator[KeptBot]:
    """With a message limit (100 a minute) the shared limit fails first, without one the
    turn's store write."""
    relay = await TcpRelay.start(postgres_url)
    settings = bot_settings(
        tmp_path / "bot.sqlite3",
        bot_api,
        model_server,
        database_url=relay.relayed_url,
        user_rate_limit_per_minute=request.param,
    )
    inbox = await PostgresInbox.open(postgres_url)
    claims = await PostgresChatLocks.open(postgres_url)
    handlings: list[int] = []
    try:
        async with open_runtime(settings) as runtime:
            config = dataclasses.replace(settings.bot_config(), external_updates=True)
            application = build_application(
                config, runtime.engine, shared=shared_state(runtime, config)
            )

            async def process(payload: str, parsed: Update | None) -> None:
                update = parsed or Update.de_json(json.loads(payload), application.bot)
                handlings.append(update.update_id)
                await application.process_update(update)

            worker = InboxWorker(
                inbox,
                claims,
                process,
                bot=application.bot,
                max_attempts=MAX_ATTEMPTS,
                poll_interval=0.05,
                outage_retry=0.05,
                outage_retry_max=0.2,
            )
            async with application:
                await application.start()
                task = asyncio.create_task(worker.run())
                try:
                    yield KeptBot(worker, relay, bot_api, postgres_url, handlings)
                finally:
                    worker.stop()
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                    await application.stop()
                    # Connections the relay lost stay silent until used: end them all so
                    # the runtime's pools close at once.
                    await relay.stop()
    finally:
        await claims.close()
        await inbox.close()
        await relay.stop()


def answers(api: FakeBotApi) -> list[Call]:
    """Finished answers in the chat (a send or an edit carrying the round footer)."""
    return [
        c
        for c in api.calls
        if c.method in ("sendMessage", "editMessageText")
        and c.result is not None
        and str(c.params.get("chat_id")) == str(CHAT)
        and any(f in c.params["text"] for f in FOOTERS)
    ]


def texts(api: FakeBotApi) -> list[str]:
    return [
        c.params["text"]
        for c in api.calls_of("sendMessage")
        if c.result is not None and str(c.params.get("chat_id")) == str(CHAT)
    ]


async def inbox_rows(url: str) -> tuple[list[tuple[int, int]], list[int]]:
    """(update_id, attempts) of the waiting rows, and the dead letters' ids."""
    db = await asyncpg.connect(url)
    try:
        waiting = await db.fetch("SELECT update_id, attempts FROM inbox ORDER BY update_id")
        dead = await db.fetch("SELECT update_id FROM dead_letters")
    finally:
        await db.close()
    return [(r["update_id"], r["attempts"]) for r in waiting], [r["update_id"] for r in dead]


async def test_a_message_handled_while_the_store_is_down_is_answered_once_it_is_back(
    kept_bot: KeptBot, model_server: FakeModelServer
) -> None:
    bot = kept_bot
    bot.relay.lose_connections()
    update = bot.api.text_message(CHAT, "Which laptop should I buy?", user_id=CHAT)
    assert await bot.worker.accept(update)
    await until(lambda: len(bot.handlings) > MAX_ATTEMPTS + 1, "handled again in the outage")

    waiting, dead = await inbox_rows(bot.url)
    assert dead == []
    assert [update_id for update_id, _ in waiting] == [update["update_id"]]
    assert all(attempts <= 1 for _, attempts in waiting)  # the outage used up no attempt

    bot.relay.restore()
    await until(lambda: len(answers(bot.api)) == 1, "answered after the outage")
    async with asyncio.timeout(WAIT):  # finished: its row deleted, nothing dead-lettered
        while await inbox_rows(bot.url) != ([], []):  # noqa: ASYNC110 - nothing signals it
            await asyncio.sleep(0.02)

    asked = [conversation(request)[-1] for request in model_server.requests]
    assert len(asked) == 1 and "Which laptop" in asked[0]
    told = texts(bot.api)
    assert sum(KEPT in text for text in told) == 1
    assert not any(SEND_AGAIN in text for text in told)
    assert len(answers(bot.api)) == 1
