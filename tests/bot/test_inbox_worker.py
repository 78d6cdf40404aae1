"""Inbox workers on PostgreSQL: each pair of (PostgresInbox, PostgresChatLocks, InboxWorker)
stands for one worker process; all of them share one database."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from telegram import Update

from bot.transport.chat import conversation_key
from bot.updates.inbox import InboxWorker
from bot.updates.ordering import command_of
from fakes.bot_updates import UpdateBuilder
from storage.postgres.cluster.inbox import PostgresInbox
from storage.postgres.cluster.locks import PostgresChatLocks
from storage.postgres.schema import migrate
from tests.postgres import postgres_url  # noqa: F401  (fixture)

WAIT = 20.0
# Advisory locks are database-wide: chats of their own keep test runs at once apart.
A = 10**9 + secrets.randbelow(10**9) * 10
B, C = A + 1, A + 2


def chat_key_of_update(update: dict[str, Any]) -> str | None:
    """The conversation key of a raw update, as the worker files it."""
    return conversation_key(Update.de_json(update, None))


@dataclass
class Recorder:
    """A fake `process`: records (chat, update_id) as each update starts and ends; an update
    whose text is in `gates` waits for that event first (unless the worker ignores gates)."""

    started: list[tuple[str, int]] = field(default_factory=list)
    finished: list[tuple[str, int]] = field(default_factory=list)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    running: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    overlapped: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    parsed_given: int = 0  # updates handed over already parsed (accepted by the same worker)

    def process(self, *, gated: bool = True) -> Callable[[str, Update | None], Any]:
        async def process(payload: str, parsed: Update | None) -> None:
            update = json.loads(payload)
            if parsed is not None:  # the worker's own parse of this very update
                assert parsed.update_id == update["update_id"]
                assert parsed.effective_message is not None
                assert parsed.effective_message.text == update["message"]["text"]
                self.parsed_given += 1
            chat = chat_key_of_update(update)
            assert chat is not None
            entry = (chat, int(update["update_id"]))
            self.started.append(entry)
            self._notify()
            self.running[chat] += 1
            if self.running[chat] > 1:
                self.overlapped.append(chat)
            try:
                gate = self.gates.get(update["message"]["text"]) if gated else None
                if gate is not None:
                    await gate.wait()
                await asyncio.sleep(0.01)
            finally:
                self.running[chat] -= 1
            self.finished.append(entry)
            self._notify()

        return process

    def _notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def until(self, check: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT):
            while not check():
                await self.changed.wait()


@dataclass
class Worker:
    inbox: PostgresInbox
    locks: PostgresChatLocks
    worker: InboxWorker
    task: asyncio.Task[None]
    closed: bool = False

    async def kill(self) -> None:
        """What SIGKILL does: every task stops where it is, the connections close."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        if not self.closed:
            self.closed = True
            await self.locks.close()
            await self.inbox.close()


async def migrated(url: str) -> None:
    """Apply the schema's migrations to the database at `url`."""
    admin = await asyncpg.connect(url)
    try:
        await migrate(admin)
    finally:
        await admin.close()


@pytest_asyncio.fixture
async def start_worker(
    postgres_url: str,  # noqa: F811
) -> AsyncIterator[Callable[..., Any]]:
    await migrated(postgres_url)
    started: list[Worker] = []

    async def start(process: Callable[[str, Update | None], Any], **options: Any) -> Worker:
        inbox = await PostgresInbox.open(postgres_url)
        locks = await PostgresChatLocks.open(postgres_url)
        worker = InboxWorker(
            inbox, locks, process, unordered_commands=("reset", "status"), **options
        )
        started.append(Worker(inbox, locks, worker, asyncio.create_task(worker.run())))
        return started[-1]

    yield start
    for running in started:
        await running.kill()


Start = Callable[..., Any]


async def test_every_update_once_in_order_per_chat_with_two_workers(
    start_worker: Start,
) -> None:
    """Updates of three chats accepted by either worker: each is processed exactly once, a
    chat's updates strictly in update_id order and never two at once."""
    recorder = Recorder()
    first = await start_worker(recorder.process())
    second = await start_worker(recorder.process())
    updates = UpdateBuilder()
    accepted: dict[str, list[int]] = defaultdict(list)
    for n in range(5):
        for chat_id in (A, B, C):
            update = updates.text_message(chat_id, f"message {n}", user_id=chat_id)
            receiver = (first, second)[(n + chat_id) % 2]
            assert await receiver.worker.accept(update) is True
            accepted[f"tg:{chat_id}"].append(update["update_id"])
    await recorder.until(lambda: len(recorder.finished) == 15)
    assert sorted(recorder.finished) == sorted(
        (chat, update_id) for chat, ids in accepted.items() for update_id in ids
    )
    for chat, ids in accepted.items():
        assert [u for c, u in recorder.started if c == chat] == ids
    assert recorder.overlapped == []
    for worker in (first, second):  # a stop lets each update end, row deleted included
        worker.worker.stop()
        await asyncio.wait_for(worker.task, WAIT)
    assert await first.inbox.depth() == 0


async def test_a_redelivered_update_is_not_accepted_again(start_worker: Start) -> None:
    recorder = Recorder()
    first = await start_worker(recorder.process())
    second = await start_worker(recorder.process())
    update = UpdateBuilder().text_message(A, "hello", user_id=A)
    assert await first.worker.accept(update) is True
    assert await second.worker.accept(update) is False
    await recorder.until(lambda: len(recorder.finished) == 1)
    assert await first.worker.accept(update) is False  # also after it was handled


async def test_chats_are_processed_in_parallel(start_worker: Start) -> None:
    """One worker: chat A's update waits until chat B's has started, so the test only ends
    if both run at once."""
    recorder = Recorder()
    worker = await start_worker(recorder.process())
    b_started = asyncio.Event()
    recorder.gates["from A"] = b_started
    updates = UpdateBuilder()
    await worker.worker.accept(updates.text_message(A, "from A", user_id=A))
    await recorder.until(lambda: len(recorder.started) == 1)
    await worker.worker.accept(updates.text_message(B, "from B", user_id=B))
    await recorder.until(lambda: (f"tg:{B}", 2) in recorder.started)
    b_started.set()
    await recorder.until(lambda: len(recorder.finished) == 2)


async def test_reset_and_status_answer_at_once_while_the_chat_is_busy(
    start_worker: Start,
) -> None:
    """While a chat's turn runs on one worker, /status and /reset received by the other are
    handled at once, not queued behind it; the next message still waits its turn."""
    recorder = Recorder()
    first = await start_worker(recorder.process())
    second = await start_worker(recorder.process())
    release = asyncio.Event()
    recorder.gates["slow question"] = release
    updates = UpdateBuilder()
    slow = updates.text_message(A, "slow question", user_id=A)
    await first.worker.accept(slow)
    await recorder.until(lambda: len(recorder.started) == 1)
    status = updates.text_message(A, "/status", user_id=A)
    following = updates.text_message(A, "next question", user_id=A)
    reset = updates.text_message(A, "/reset", user_id=A)
    for update in (status, following, reset):
        assert await second.worker.accept(update) is True
    await recorder.until(lambda: len(recorder.finished) == 2)
    assert recorder.finished == [(f"tg:{A}", status["update_id"]), (f"tg:{A}", reset["update_id"])]
    assert await second.worker.accept(reset) is False  # a redelivered command is dropped
    release.set()
    await recorder.until(lambda: len(recorder.finished) == 4)
    assert recorder.finished[2:] == [
        (f"tg:{A}", slow["update_id"]),
        (f"tg:{A}", following["update_id"]),
    ]


async def test_a_killed_worker_leaves_its_unfinished_update_to_another(
    start_worker: Start,
) -> None:
    """The worker running a chat dies mid-update: the other claims the chat once the dead
    one's connection is gone and processes the unfinished update, then the rest, in order."""
    recorder = Recorder()
    doomed = await start_worker(recorder.process())
    recorder.gates["never finishes"] = asyncio.Event()
    updates = UpdateBuilder()
    stuck = updates.text_message(A, "never finishes", user_id=A)
    after = updates.text_message(A, "after", user_id=A)
    await doomed.worker.accept(stuck)
    await doomed.worker.accept(after)
    await recorder.until(lambda: len(recorder.started) == 1)
    survivor = await start_worker(recorder.process(gated=False))
    await doomed.kill()
    await recorder.until(lambda: len(recorder.finished) == 2)
    assert recorder.started == [
        (f"tg:{A}", stuck["update_id"]),
        (f"tg:{A}", stuck["update_id"]),
        (f"tg:{A}", after["update_id"]),
    ]
    assert recorder.finished == [(f"tg:{A}", stuck["update_id"]), (f"tg:{A}", after["update_id"])]
    survivor.worker.stop()
    await asyncio.wait_for(survivor.task, WAIT)
    assert await survivor.inbox.depth() == 0


async def test_a_stopped_worker_finishes_the_update_it_runs_then_stops(
    start_worker: Start,
) -> None:
    """A graceful stop (SIGTERM) lets the running update end and leaves the rest queued."""
    recorder = Recorder()
    worker = await start_worker(recorder.process())
    release = asyncio.Event()
    recorder.gates["running"] = release
    updates = UpdateBuilder()
    await worker.worker.accept(updates.text_message(A, "running", user_id=A))
    await worker.worker.accept(updates.text_message(A, "queued", user_id=A))
    await recorder.until(lambda: len(recorder.started) == 1)
    worker.worker.stop()
    release.set()
    await asyncio.wait_for(worker.task, WAIT)
    assert [u for _, u in recorder.finished] == [1]
    assert await worker.inbox.depth() == 1


def test_the_chat_key_of_a_raw_update_is_its_conversation_key() -> None:
    updates = UpdateBuilder()
    private = updates.text_message(701, "hi", user_id=701)
    topic = updates.text_message(
        -1001, "hi", user_id=5, chat_type="supergroup", message_thread_id=7, is_topic_message=True
    )
    assert chat_key_of_update(private) == "tg:701"
    assert chat_key_of_update(topic) == "tg:-1001:7"
    assert chat_key_of_update({"update_id": 9}) is None


@pytest.mark.parametrize("text", ["/reset", "/status@consult_bot", "/RESET now"])
def test_reset_and_status_are_the_unordered_commands(text: str) -> None:
    update = UpdateBuilder().text_message(701, text, user_id=701)
    assert command_of(Update.de_json(update, None)) in {"reset", "status"}


async def test_each_queued_update_reports_how_long_it_waited(postgres_url: str) -> None:  # noqa: F811
    """`on_claim` hears, for each queued update as its processing starts, the seconds since
    it was accepted (the claim latency of /metrics); an update handled at once is not queued."""
    await migrated(postgres_url)
    inbox = await PostgresInbox.open(postgres_url)
    locks = await PostgresChatLocks.open(postgres_url)
    recorder = Recorder()
    waits: list[float] = []
    worker = InboxWorker(
        inbox, locks, recorder.process(), unordered_commands=("status",), on_claim=waits.append
    )
    task = asyncio.create_task(worker.run())
    try:
        updates = UpdateBuilder()
        before = time.time()
        await worker.accept(updates.text_message(A, "hello", user_id=A))
        await worker.accept(updates.text_message(A, "/status", user_id=A))
        await recorder.until(lambda: len(recorder.finished) == 2)
        after = time.time()
        assert len(waits) == 1
        assert 0 <= waits[0] <= after - before
    finally:
        worker.stop()
        await asyncio.wait_for(task, WAIT)
        await locks.close()
        await inbox.close()


class ClaimsWithAHook:
    """The real claims, with `before_release` awaited once as a claim is about to end: the
    moment a row can arrive after the chat's last look and before the claim is released."""

    def __init__(self, claims: PostgresChatLocks) -> None:
        self._claims = claims
        self.before_release: Callable[[], Awaitable[None]] | None = None

    @contextlib.asynccontextmanager
    async def try_hold(self, key: str) -> AsyncIterator[bool]:
        async with self._claims.try_hold(key) as held:
            yield held
            hook, self.before_release = self.before_release, None
            if held and hook is not None:
                await hook()


async def test_a_row_queued_between_the_last_look_and_the_release_is_processed(
    postgres_url: str,  # noqa: F811
) -> None:
    """No periodic look to fall back on: the row's notification, heard while the chat was
    still claimed, makes the worker look again instead of leaving the row waiting."""
    await migrated(postgres_url)
    inbox = await PostgresInbox.open(postgres_url)
    locks = await PostgresChatLocks.open(postgres_url)
    claims = ClaimsWithAHook(locks)
    recorder = Recorder()
    worker = InboxWorker(inbox, claims, recorder.process(), poll_interval=3600)
    task = asyncio.create_task(worker.run())
    updates = UpdateBuilder()

    async def queue_another() -> None:
        await worker.accept(updates.text_message(A, "second", user_id=A))
        await asyncio.sleep(0.3)  # its notification reaches this worker meanwhile

    try:
        claims.before_release = queue_another
        await worker.accept(updates.text_message(A, "first", user_id=A))
        await recorder.until(lambda: len(recorder.finished) == 2)
        assert [entry[1] for entry in recorder.finished] == sorted(
            entry[1] for entry in recorder.finished
        )
        assert recorder.parsed_given == 2  # each parsed once, when it was accepted
    finally:
        worker.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await locks.close()
        await inbox.close()
