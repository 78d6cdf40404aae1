"""Polling with several workers: one leader polls the fake Bot API and fills the shared inbox;
when it dies another worker takes over, and no update is lost or queued twice."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest_asyncio
from telegram import Bot, Update

from bot.transport.chat import conversation_key
from bot.updates.polling import PollingLeader
from core.domain.errors import StoreUnavailable
from fakes.bot_api import TOKEN, FakeBotApi
from storage.postgres.cluster.inbox import PostgresInbox
from storage.postgres.cluster.locks import PostgresLeadership
from storage.postgres.schema import migrate
from tests.postgres import postgres_url  # noqa: F401  (fixture)
from tests.service_harness import MakeEngine
from tests.waiting import until

WAIT = 20.0


@dataclass
class Poller:
    """One worker process's polling side: its bot, leadership connection and inbox."""

    bot: Bot
    leadership: PostgresLeadership
    inbox: PostgresInbox
    leader: PollingLeader
    task: asyncio.Task[None]
    accepted: Counter[int]  # update id → times any poller's sink took it as new
    offered: Counter[int]  # update id → times any poller's sink was given it
    stall_after: set[int]  # the sink never returns after queueing these (a dying leader)
    closed: bool = False

    async def kill(self) -> None:
        """What SIGKILL does: the loop stops where it is, the connections close."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        if not self.closed:
            self.closed = True
            await self.leadership.close()
            await self.inbox.close()
            await self.bot.shutdown()


@pytest_asyncio.fixture
async def start_poller(
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
) -> AsyncIterator[Callable[[], Any]]:
    admin = await asyncpg.connect(postgres_url)
    try:
        await migrate(admin)
    finally:
        await admin.close()
    name = f"test-polling-{uuid.uuid4().hex}"  # tests running at once never share a leader
    started: list[Poller] = []
    accepted: Counter[int] = Counter()
    offered: Counter[int] = Counter()

    async def start() -> Poller:
        stall_after: set[int] = set()
        inbox = await PostgresInbox.open(postgres_url)
        leadership = PostgresLeadership(postgres_url, name)
        bot = Bot(TOKEN, base_url=bot_api.base_url)
        await bot.initialize()

        async def sink(update: dict[str, Any], parsed: Update) -> bool:
            assert parsed.update_id == update["update_id"]
            chat = conversation_key(parsed) or "none"
            new = await inbox.put(update["update_id"], chat, json.dumps(update))
            accepted[update["update_id"]] += new
            offered[update["update_id"]] += 1
            if update["update_id"] in stall_after:
                await asyncio.Event().wait()
            return new

        leader = PollingLeader(bot, sink, leadership, poll_timeout=1, retry_interval=0.2)
        task = asyncio.create_task(leader.run())
        started.append(Poller(bot, leadership, inbox, leader, task, accepted, offered, stall_after))
        return started[-1]

    yield start
    for poller in started:
        await poller.kill()


async def test_one_leader_polls_and_another_takes_over_when_it_dies(
    start_poller: Callable[[], Any], bot_api: FakeBotApi
) -> None:
    """Two workers, one leader; the leader dies after queueing updates it had not yet
    acknowledged to Telegram, and more arrive while nobody polls: the other becomes leader,
    fetches the unacknowledged ones again, and every update is in the inbox once, in
    update_id order."""
    first = await start_poller()
    second = await start_poller()

    async def one_leader() -> bool:
        return [first.leader.leading, second.leader.leading].count(True) == 1

    await until(one_leader, "one worker leads")
    leader, follower = (first, second) if first.leader.leading else (second, first)
    batch = [bot_api.text_message(801, f"before {n}", user_id=801) for n in range(3)]
    leader.stall_after.add(batch[-1]["update_id"])  # queued, then the leader hangs
    pushed = [bot_api.push_update(update)["update_id"] for update in batch]

    def depth_is(count: int) -> Callable[[], Any]:
        async def check() -> bool:
            return await follower.inbox.depth() == count

        return check

    await until(depth_is(3), "three updates queued")

    async def leader_counted_them() -> bool:  # committed is not yet answered to the leader
        return all(leader.offered[update_id] == 1 for update_id in pushed)

    await until(leader_counted_them, "the leader's sink took all three")
    await leader.kill()
    pushed += [
        bot_api.push_update(bot_api.text_message(801, f"after {n}", user_id=801))["update_id"]
        for n in range(3)
    ]

    async def follower_leads() -> bool:
        return follower.leader.leading

    await until(follower_leads, "the follower leads")
    await until(depth_is(6), "six updates queued")
    rows = await follower.inbox.pending_chats()
    assert rows == ["tg:801"]
    taken = []
    while (row := await follower.inbox.next("tg:801")) is not None:
        taken.append(row[0])
        await follower.inbox.finish(row[0], "tg:801")
    assert taken == pushed
    assert dict(follower.accepted) == dict.fromkeys(pushed, 1)
    assert follower.offered[pushed[2]] == 2  # fetched again by the new leader, refused


async def test_an_application_fed_by_the_inbox_has_no_updater_and_its_bot_polls(
    bot_api: FakeBotApi, engine: MakeEngine
) -> None:
    """With updates from outside (the inbox) PTB runs no Updater of its own, and the leader
    polls with the application's bot: a long poll longer than the ordinary read timeout."""
    from bot.app import build_application
    from bot.transport.config import BotConfig

    config = BotConfig(token=TOKEN, api_base_url=bot_api.base_url, external_updates=True)
    application = build_application(config, engine())
    assert application.updater is None
    async with application:
        bot_api.push_update(bot_api.text_message(801, "hello", user_id=801))
        (update,) = await application.bot.get_updates(timeout=40)
        assert update.message is not None and update.message.text == "hello"


@dataclass
class LoneLeader:
    """One worker polling alone; its inbox refuses each id in `refuse_once` the first time
    it is offered (as when the database is briefly unreachable)."""

    inbox: PostgresInbox
    leader: PollingLeader
    offered: Counter[int]
    refuse_once: set[int]


@pytest_asyncio.fixture
async def lone_leader(
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
) -> AsyncIterator[LoneLeader]:
    admin = await asyncpg.connect(postgres_url)
    try:
        await migrate(admin)
    finally:
        await admin.close()
    inbox = await PostgresInbox.open(postgres_url)
    leadership = PostgresLeadership(postgres_url, f"test-polling-{uuid.uuid4().hex}")
    bot = Bot(TOKEN, base_url=bot_api.base_url)
    await bot.initialize()
    offered: Counter[int] = Counter()
    refuse_once: set[int] = set()

    async def sink(update: dict[str, Any], parsed: Update) -> bool:
        update_id = update["update_id"]
        offered[update_id] += 1
        if update_id in refuse_once:
            refuse_once.discard(update_id)
            raise StoreUnavailable("the inbox is unavailable (test)")
        return await inbox.put(update_id, conversation_key(parsed) or "none", json.dumps(update))

    leader = PollingLeader(bot, sink, leadership, poll_timeout=1, retry_interval=0.2)
    task = asyncio.create_task(leader.run())
    try:
        yield LoneLeader(inbox, leader, offered, refuse_once)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await leadership.close()
        await inbox.close()
        await bot.shutdown()


def offsets_named(bot_api: FakeBotApi) -> list[int]:
    """The offsets the poller's getUpdates calls named, in order (calls without one left out)."""
    return [c.params["offset"] for c in bot_api.calls_of("getUpdates") if "offset" in c.params]


async def test_an_update_the_inbox_refuses_is_fetched_again_before_later_ones_are_acknowledged(
    lone_leader: LoneLeader, bot_api: FakeBotApi
) -> None:
    """Three updates come in one getUpdates and the inbox refuses the middle one: the next
    poll names the refused update's id as its offset (acknowledging only the first), so it
    comes again, and each of the three is queued once, in order."""

    async def leading() -> bool:
        return lone_leader.leader.leading

    await until(leading, "a worker leads")
    batch = [bot_api.text_message(801, f"message {n}", user_id=801) for n in range(3)]
    ids = [bot_api.push_update(update)["update_id"] for update in batch]
    lone_leader.refuse_once.add(ids[1])

    await bot_api.wait_for(lambda c: c.method == "getUpdates" and "offset" in c.params, 10)
    assert offsets_named(bot_api)[0] == ids[1]

    async def all_queued() -> bool:
        return await lone_leader.inbox.depth() == 3

    await until(all_queued, "all updates queued")
    taken = []
    while (row := await lone_leader.inbox.next("tg:801")) is not None:
        taken.append(row.update_id)
        await lone_leader.inbox.finish(row.update_id, "tg:801")
    assert taken == ids
    assert lone_leader.offered[ids[1]] == 2


async def test_the_last_update_of_a_batch_is_acknowledged_by_the_next_poll(
    lone_leader: LoneLeader, bot_api: FakeBotApi
) -> None:
    """Once a batch is queued the next getUpdates names the offset one past its last update,
    so Telegram forgets it and it is never fetched again."""

    async def leading() -> bool:
        return lone_leader.leader.leading

    await until(leading, "a worker leads")
    ids = [
        bot_api.push_update(bot_api.text_message(801, f"message {n}", user_id=801))["update_id"]
        for n in range(2)
    ]

    await bot_api.wait_for(lambda c: c.method == "getUpdates" and "offset" in c.params, 10)
    assert offsets_named(bot_api)[0] == ids[-1] + 1
    polls = len(bot_api.calls_of("getUpdates"))
    await bot_api.wait_for("getUpdates", 10, count=polls + 1)  # one more poll, after the first
    assert lone_leader.offered == dict.fromkeys(ids, 1)
