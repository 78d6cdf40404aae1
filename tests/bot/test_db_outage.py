"""A PostgreSQL outage (connections refused with 55000, backends terminated) while the inbox
worker and the polling leader run: both keep running, say so in the log, and go on with the
rows and updates queued during and after the outage once the database is back; a worker
process answers 503 meanwhile, never 500."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from telegram import Bot, Update

from bot.updates.inbox import InboxWorker
from bot.updates.polling import PollingLeader
from core.domain.errors import StoreUnavailable
from fakes.bot_api import TOKEN, FakeBotApi
from fakes.bot_updates import UpdateBuilder
from fakes.model_server import FakeModelServer
from storage.postgres.cluster.inbox import PostgresInbox
from storage.postgres.cluster.locks import PostgresChatLocks, PostgresLeadership
from tests.bot.test_inbox_worker import A, B, Recorder
from tests.cluster_harness import (
    API_TOKEN,
    PATH,
    Replies,
    chat_ids,
    cluster,
    free_port,
    post_update,
    worker_env,
)
from tests.pg_outage import SURVIVOR, Outage, outage, with_application_name  # noqa: F401
from tests.waiting import until

WAIT = 20.0


class WatchedInbox:
    """The real inbox, counting the looks that failed (what the outage did to the worker)."""

    def __init__(self, inbox: PostgresInbox) -> None:
        self.inbox = inbox
        self.failed: list[BaseException] = []

    async def put(self, update_id: int, chat_key: str, payload: str) -> bool:
        return await self.inbox.put(update_id, chat_key, payload)

    async def remember(self, update_id: int) -> bool:
        return await self.inbox.remember(update_id)

    async def pending_chats(self, exclude: Collection[str] = (), limit: int = 100) -> list[str]:
        try:
            return await self.inbox.pending_chats(exclude, limit)
        except Exception as error:
            self.failed.append(error)
            raise

    async def next(self, chat_key: str) -> tuple[int, str, float] | None:
        return await self.inbox.next(chat_key)

    async def finish(self, update_id: int, chat_key: str) -> tuple[int, str, float] | None:
        return await self.inbox.finish(update_id, chat_key)

    async def listen(self, callback: Callable[[str], object]) -> None:
        try:
            await self.inbox.listen(callback)
        except Exception as error:
            self.failed.append(error)
            raise

    def __getattr__(self, name: str) -> Any:  # whatever else the worker asks of an inbox
        return getattr(self.inbox, name)


async def accept_when_back(worker: InboxWorker, update: dict[str, Any]) -> None:
    """Accept `update` as Telegram's redeliveries would: again while it is refused."""
    async with asyncio.timeout(WAIT):
        while True:
            try:
                await worker.accept(update)
                return
            except StoreUnavailable:
                await asyncio.sleep(0.05)


async def test_the_inbox_worker_outlives_an_outage_and_works_what_was_queued(
    outage: Outage,  # noqa: F811
) -> None:
    """During the outage the worker's looks fail (55000, then 57P01 on the connections it
    had) and an update cannot be accepted (StoreUnavailable, never the raw error); a row
    queued meanwhile by a worker whose connection survived, and one accepted after the
    outage, are both processed by the same, still running, worker."""
    inbox = WatchedInbox(await PostgresInbox.open(outage.url))
    claims = await PostgresChatLocks.open(outage.url)
    survivor = await PostgresInbox.open(with_application_name(outage.url, SURVIVOR), pool_size=1)
    recorder = Recorder()
    worker = InboxWorker(inbox, claims, recorder.process(), poll_interval=0.05)  # type: ignore[arg-type]
    task = asyncio.create_task(worker.run())
    updates = UpdateBuilder()
    try:
        before = updates.text_message(A, "before", user_id=A)
        await worker.accept(before)
        await recorder.until(lambda: len(recorder.finished) == 1)

        async def emptied() -> bool:
            return await inbox.inbox.depth() == 0

        # Its row is deleted just after the handling returns: an outage beginning in between
        # would leave it to be worked again afterwards (at least once, as it should).
        await until(emptied, "the first update's row deleted")
        await outage.begin()
        try:
            await until(lambda: len(inbox.failed) >= 3 or task.done(), "three failed looks")
            assert not task.done(), f"the worker ended: {task.exception()!r}"
            with pytest.raises(StoreUnavailable):
                await worker.accept(updates.text_message(B, "refused", user_id=B))
            during = updates.text_message(A, "during", user_id=A)
            queued = await survivor.put(during["update_id"], f"tg:{A}", json.dumps(during))
            assert queued
        finally:
            await outage.end()

        after = updates.text_message(B, "after", user_id=B)
        await accept_when_back(worker, after)
        await recorder.until(lambda: len(recorder.finished) == 3)
        assert sorted(recorder.finished) == sorted(
            [(f"tg:{A}", before["update_id"]), (f"tg:{A}", during["update_id"]),
             (f"tg:{B}", after["update_id"])]
        )  # fmt: skip
        assert not task.done()
    finally:
        worker.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await survivor.close()
        await claims.close()
        await inbox.inbox.close()
    assert {type(error).__name__ for error in inbox.failed} == {"StoreUnavailable"}


class WatchedLeadership:
    """The real leadership, counting the attempts to lead that failed."""

    def __init__(self, leadership: PostgresLeadership) -> None:
        self.leadership = leadership
        self.failed: list[BaseException] = []

    async def try_acquire(self) -> bool:
        try:
            return await self.leadership.try_acquire()
        except Exception as error:
            self.failed.append(error)
            raise

    async def held(self) -> bool:
        return await self.leadership.held()


async def test_the_polling_leader_outlives_an_outage_and_leads_again(
    outage: Outage,  # noqa: F811
    bot_api: FakeBotApi,
) -> None:
    """The leader's lock connection is terminated and no new one can be opened (55000):
    it stops leading, keeps trying, and once the database is back leads and polls again,
    queueing the update that arrived meanwhile."""
    inbox = await PostgresInbox.open(outage.url)
    leadership = WatchedLeadership(PostgresLeadership(outage.url, "outage-test"))
    bot = Bot(TOKEN, base_url=bot_api.base_url)
    await bot.initialize()
    queued: list[int] = []

    async def sink(update: dict[str, Any], parsed: Update) -> bool:
        new = await inbox.put(update["update_id"], "tg:1", json.dumps(update))
        queued.append(update["update_id"])
        return new

    leader = PollingLeader(bot, sink, leadership, poll_timeout=1, retry_interval=0.05)  # type: ignore[arg-type]
    task = asyncio.create_task(leader.run())
    try:
        await until(lambda: leader.leading, "leading")
        await outage.begin()
        try:
            await until(lambda: len(leadership.failed) >= 2 or task.done(), "two failed tries")
            assert not task.done(), f"the leader ended: {task.exception()!r}"
            assert not leader.leading
            pushed = bot_api.push_update(bot_api.text_message(1, "meanwhile", user_id=1))
        finally:
            await outage.end()
        await until(lambda: pushed["update_id"] in queued, "the update queued")
        assert leader.leading
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await leadership.leadership.close()
        await inbox.close()
        await bot.shutdown()
    assert {type(error).__name__ for error in leadership.failed} == {"StoreUnavailable"}


@pytest.mark.timeout(120)
async def test_a_worker_process_answers_503_during_an_outage_and_works_on_after_it(
    tmp_path: Path,
    outage: Outage,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """A real `python -m bot` worker (webhook and API) on the database taken away: the
    webhook and /api/chat answer 503 (never 500), /healthz 503; the inbox worker logs that
    it cannot look and keeps trying; once the database is back, the update refused
    meanwhile (redelivered by Telegram) and a new one are both answered, and /healthz is
    200 again with every loop "ok"."""
    [chat] = chat_ids(1)
    port = free_port()
    env = worker_env(tmp_path, bot_api, model_server, outage.url, port=port, api=True)
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {API_TOKEN}"}
    async with cluster(tmp_path) as workers, aiohttp.ClientSession() as http:
        worker = await workers.start(env, port)
        await workers.running()
        replies = Replies(bot_api)
        first = bot_api.text_message(chat, "Before the outage", user_id=chat)
        assert await post_update(http, base + PATH, first) == 200
        await replies.first_line(chat, "Reply to: Before the outage")

        await outage.begin()
        try:
            during = bot_api.text_message(chat, "During the outage", user_id=chat)
            assert await post_update(http, base + PATH, during) == 503
            async with http.post(
                base + "/api/chat", json={"message": "Hello"}, headers=auth
            ) as response:
                assert response.status == 503, await response.text()
                assert (await response.json())["code"] == "STORE_UNAVAILABLE"
            async with http.get(base + "/healthz") as response:
                assert response.status == 503
                assert (await response.json())["store"] is False
            await worker.bot.logged("inbox: the inbox", timeout=30)  # a look failed, logged
        finally:
            await outage.end()

        async def delivered(update: dict[str, Any]) -> None:
            async with asyncio.timeout(WAIT):
                while await post_update(http, base + PATH, update) != 200:  # noqa: ASYNC110
                    await asyncio.sleep(0.1)  # Telegram redelivers a refused update

        await delivered(during)
        after = bot_api.text_message(chat, "After the outage", user_id=chat)
        await delivered(after)
        await replies.first_line(chat, "Reply to: During the outage")
        await replies.first_line(chat, "Reply to: After the outage")
        async with asyncio.timeout(WAIT):
            while True:
                async with http.get(base + "/healthz") as response:
                    body = await response.json()
                if response.status == 200:
                    break
                await asyncio.sleep(0.1)
        assert body["loops"] == {
            "bots": "ok",  # the bots table, read again once the database is back
            "cleanup": "ok",
            "event loop watcher": "ok",
            "heartbeat": "ok",
            "inbox": "ok",
        }
        assert " 500 " not in worker.log()
