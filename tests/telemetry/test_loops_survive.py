"""Each long-lived loop survives an exception nobody planned for (a RuntimeError from what
it calls): it logs it with its name, tries again, and goes on doing its job. (The event
loop watcher's own test is in tests/telemetry/test_loopwatch.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest
from telegram import Bot, Update

from app.runtime import _cleanup_loop
from bot.updates.inbox import InboxWorker
from bot.updates.polling import PollingLeader
from fakes.bot_api import TOKEN, FakeBotApi
from fakes.bot_updates import UpdateBuilder
from storage.postgres.cluster.inbox import PostgresInbox
from storage.postgres.cluster.locks import PostgresChatLocks, PostgresLeadership
from telemetry.supervision import LoopRegistry
from tests.api_harness import api_settings
from tests.bot.test_inbox_worker import A, Recorder, migrated
from tests.postgres import postgres_url  # noqa: F401  (fixture)

WAIT = 20.0


class FailingOnce:
    """The real inbox, whose first `pending_chats` raises a RuntimeError."""

    def __init__(self, inbox: PostgresInbox) -> None:
        self.inbox = inbox
        self.failed = False

    async def pending_chats(self, exclude: Collection[str] = (), limit: int = 100) -> list[str]:
        if not self.failed:
            self.failed = True
            raise RuntimeError("an unexpected failure")
        return await self.inbox.pending_chats(exclude, limit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inbox, name)


def logged_failure(caplog: pytest.LogCaptureFixture, loop: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.exc_info is not None and r.getMessage().startswith(f"{loop} failed")
    ]


async def test_the_inbox_worker_survives_a_failed_look(
    postgres_url: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its first look raises: logged, and the row queued before it is processed by a later
    look (no notification reaches this worker for it: it was queued before it listened)."""
    await migrated(postgres_url)
    inbox = await PostgresInbox.open(postgres_url)
    claims = await PostgresChatLocks.open(postgres_url)
    update = UpdateBuilder().text_message(A, "waiting", user_id=A)
    await inbox.put(update["update_id"], f"tg:{A}", json.dumps(update))
    recorder = Recorder()
    loops = LoopRegistry()
    flaky = FailingOnce(inbox)
    worker = InboxWorker(flaky, claims, recorder.process(), poll_interval=0.05, loops=loops)  # type: ignore[arg-type]
    task = asyncio.create_task(worker.run())
    try:
        await recorder.until(lambda: len(recorder.finished) == 1)
        assert flaky.failed and not task.done()
        assert loops.problems() == {}
    finally:
        worker.stop()
        await asyncio.wait_for(task, WAIT)
        await claims.close()
        await inbox.close()
    assert logged_failure(caplog, "inbox")


class LeadershipFailingOnce:
    """The real leadership, whose first `try_acquire` raises a RuntimeError."""

    def __init__(self, leadership: PostgresLeadership) -> None:
        self.leadership = leadership
        self.failed = False

    async def try_acquire(self) -> bool:
        if not self.failed:
            self.failed = True
            raise RuntimeError("an unexpected failure")
        return await self.leadership.try_acquire()

    async def held(self) -> bool:
        return await self.leadership.held()


async def test_the_polling_leader_survives_a_failed_step(
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its first attempt to lead raises: logged; it then leads and polls."""
    leadership = LeadershipFailingOnce(PostgresLeadership(postgres_url, "survive-test"))
    bot = Bot(TOKEN, base_url=bot_api.base_url)
    await bot.initialize()
    taken: list[int] = []
    got = asyncio.Event()

    async def sink(update: dict[str, Any], parsed: Update) -> bool:
        taken.append(update["update_id"])
        got.set()
        return True

    leader = PollingLeader(bot, sink, leadership, poll_timeout=1, retry_interval=0.05)  # type: ignore[arg-type]
    task = asyncio.create_task(leader.run())
    try:
        pushed = bot_api.push_update(bot_api.text_message(1, "hello", user_id=1))
        await asyncio.wait_for(got.wait(), WAIT)
        assert taken == [pushed["update_id"]]
        assert leadership.failed and not task.done()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await leadership.leadership.close()
        await bot.shutdown()
    assert logged_failure(caplog, "polling")


class LifecycleFailingOnce:
    """Stands for `service.lifecycle`: its first cleanup raises, the next is counted."""

    def __init__(self) -> None:
        self.calls = 0
        self.again = asyncio.Event()

    async def cleanup(self, *, retention_seconds: float, now: float) -> tuple[int, int]:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("an unexpected failure")
        self.again.set()
        return 0, 0


class ServiceFailingOnce:
    """Stands for the consultation service, whose cleanup fails once."""

    def __init__(self) -> None:
        self.lifecycle = LifecycleFailingOnce()


async def test_the_cleanup_survives_a_failed_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its first run raises: logged, and the next run comes after the back-off (at most
    the cleanup interval)."""
    settings = api_settings(
        tmp_path / "unused.sqlite3", "http://127.0.0.1:9", cleanup_interval_seconds=1
    )
    service = ServiceFailingOnce()
    loops = LoopRegistry()
    with caplog.at_level(logging.WARNING):
        task = asyncio.create_task(_cleanup_loop(service, settings, loops))  # type: ignore[arg-type]
        try:
            await asyncio.wait_for(service.lifecycle.again.wait(), WAIT)
            assert not task.done()
            assert loops.problems() == {}
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert logged_failure(caplog, "cleanup")
