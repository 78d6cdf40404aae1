"""Updates the inbox gives up: too many attempts (each ended by a dead worker), past the
handling deadline, or a handling that raised; each is moved to the dead letters, its chat
is told once and the chat's next update goes on. And a /reset at one worker stops the
update another worker is handling. Each (PostgresInbox, PostgresChatLocks, InboxWorker)
stands for one worker process; all share one database."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from telegram import Update

from bot.updates.in_flight import stop_earlier
from core.domain.errors import StoreUnavailable
from fakes.bot_updates import UpdateBuilder
from storage.postgres.cluster.dead_letters import dead_letters, drop, replay
from tests.bot.test_inbox_worker import WAIT, Recorder, start_worker  # noqa: F401  (fixture)
from tests.postgres import postgres_url  # noqa: F401  (fixture)
from tests.waiting import until

Start = Callable[..., Any]
CHAT = 3 * 10**9 + secrets.randbelow(10**9)


class Told:
    """A fake `on_dead`: what each chat was told, as (update_id, reason)."""

    def __init__(self) -> None:
        self.told: list[tuple[int, str]] = []
        self.changed = asyncio.Event()

    async def __call__(self, payload: str, _parsed: Update | None, reason: str) -> None:
        self.told.append((int(json.loads(payload)["update_id"]), reason))
        self.changed.set()

    async def until(self, count: int) -> None:
        async with asyncio.timeout(WAIT):
            while len(self.told) < count:
                self.changed.clear()
                await self.changed.wait()


def inbox_empty(worker: Any) -> Callable[[], Awaitable[bool]]:
    """A check that the worker's inbox holds nothing: a handled update's row is deleted
    just after its handling returns, so the recorder may see the finish first."""

    async def check() -> bool:
        return await worker.inbox.depth() == 0

    return check


async def letters(url: str) -> list[tuple[int, str, int]]:
    db = await asyncpg.connect(url)
    try:
        return [(d.update_id, d.reason, d.attempts) for d in await dead_letters(db)]
    finally:
        await db.close()


async def attempts_of(url: str, update_id: int) -> int | None:
    db = await asyncpg.connect(url)
    try:
        value = await db.fetchval("SELECT attempts FROM inbox WHERE update_id = $1", update_id)
    finally:
        await db.close()
    return None if value is None else int(value)


def poisoned(
    recorder: Recorder,
    *,
    raising: str = "",
    hanging: str = "",
    cancelled: asyncio.Event | None = None,
) -> Any:
    """The recorder's process, except that `raising` always raises and `hanging` never ends
    (until cancelled: then it sets `cancelled`)."""
    inner = recorder.process(gated=False)

    async def process(payload: str, parsed: Update | None) -> None:
        text = json.loads(payload)["message"]["text"]
        if text == raising:
            raise RuntimeError("this update always breaks its handling")
        if text == hanging:
            recorder.started.append(("hanging", int(json.loads(payload)["update_id"])))
            recorder._notify()
            try:
                await asyncio.Event().wait()
            finally:
                if cancelled is not None:
                    cancelled.set()
        await inner(payload, parsed)

    return process


@pytest.mark.parametrize(
    ("options", "reason"),
    [({"raising": "poison"}, "error"), ({"hanging": "poison"}, "deadline")],
    ids=["raises", "hangs"],
)
async def test_an_update_that_raises_or_hangs_is_dead_lettered_and_the_chat_goes_on(
    start_worker: Start,  # noqa: F811
    postgres_url: str,  # noqa: F811
    options: dict[str, str],
    reason: str,
) -> None:
    """Handled once (not retried; one that hangs is cancelled at the deadline), moved to
    the dead letters with the reason, its chat told once; the chat's next update is
    handled."""
    recorder, told = Recorder(), Told()
    process = poisoned(recorder, **options)
    worker = await start_worker(process, on_dead=told, deadline=0.5)
    updates = UpdateBuilder()
    poison = updates.text_message(CHAT, "poison", user_id=CHAT)
    after = updates.text_message(CHAT, "after", user_id=CHAT)
    await worker.worker.accept(poison)
    await worker.worker.accept(after)
    await recorder.until(lambda: len(recorder.finished) == 1)
    assert recorder.finished == [(f"tg:{CHAT}", after["update_id"])]
    assert told.told == [(poison["update_id"], reason)]
    assert await letters(postgres_url) == [(poison["update_id"], reason, 1)]
    await until(inbox_empty(worker), "the inbox emptied")


async def test_an_update_that_kills_its_worker_each_time_is_given_up_after_max_attempts(
    start_worker: Start,  # noqa: F811
    postgres_url: str,  # noqa: F811
) -> None:
    """Each attempt is counted before the handling starts, so a worker killed mid-update
    still counts it; after three, the next worker moves the update to the dead letters
    without handling it again, tells its chat once, and goes on with the chat."""
    recorder, told = Recorder(), Told()
    updates = UpdateBuilder()
    poison = updates.text_message(CHAT, "kills its worker", user_id=CHAT)
    after = updates.text_message(CHAT, "after", user_id=CHAT)
    for attempt in (1, 2, 3):
        doomed = await start_worker(poisoned(recorder, hanging="kills its worker"), on_dead=told)
        if attempt == 1:
            await doomed.worker.accept(poison)
            await doomed.worker.accept(after)
        await recorder.until(lambda n=attempt: len(recorder.started) == n)  # type: ignore[misc]
        assert await attempts_of(postgres_url, poison["update_id"]) == attempt
        await doomed.kill()
    survivor = await start_worker(poisoned(recorder, hanging="kills its worker"), on_dead=told)
    await recorder.until(lambda: len(recorder.finished) == 1)
    assert recorder.finished == [(f"tg:{CHAT}", after["update_id"])]
    assert [u for _, u in recorder.started] == [poison["update_id"]] * 3 + [after["update_id"]]
    assert told.told == [(poison["update_id"], "attempts")]
    assert await letters(postgres_url) == [(poison["update_id"], "attempts", 3)]
    await until(inbox_empty(survivor), "the inbox emptied")


async def test_an_update_failed_by_a_store_outage_more_than_max_attempts_times_is_kept(
    start_worker: Start,  # noqa: F811
    postgres_url: str,  # noqa: F811
) -> None:
    """Its handlings raise StoreUnavailable five times (max attempts: 3): none is counted,
    nothing is dead-lettered or told, the chat's next update waits behind it, and once the
    store is back both are handled, in order."""
    recorder, told = Recorder(), Told()
    inner = recorder.process(gated=False)
    failures: list[int] = []

    async def process(payload: str, parsed: Update | None) -> None:
        update = json.loads(payload)
        if update["message"]["text"] == "during the outage" and len(failures) < 5:
            failures.append(int(update["update_id"]))
            raise StoreUnavailable("the database is down")
        await inner(payload, parsed)

    worker = await start_worker(
        process, on_dead=told, max_attempts=3, outage_retry=0.02, outage_retry_max=0.1
    )
    updates = UpdateBuilder()
    first = updates.text_message(CHAT, "during the outage", user_id=CHAT)
    after = updates.text_message(CHAT, "after", user_id=CHAT)
    await worker.worker.accept(first)
    await worker.worker.accept(after)
    await recorder.until(lambda: len(recorder.finished) == 2)
    assert failures == [first["update_id"]] * 5
    assert recorder.finished == [
        (f"tg:{CHAT}", first["update_id"]),
        (f"tg:{CHAT}", after["update_id"]),
    ]
    assert told.told == []
    assert await letters(postgres_url) == []
    await until(inbox_empty(worker), "the inbox emptied")


async def test_a_reset_at_another_worker_stops_the_update_being_handled(
    start_worker: Start,  # noqa: F811
    postgres_url: str,  # noqa: F811
) -> None:
    """The chat's update hangs on one worker; /reset reaches the other one. A /reset whose
    handler does not call `stop_earlier` (a member not allowed to reset) stops nothing; one
    that does learns it stopped an update, the hung handling is cancelled (not given up:
    nothing told, no dead letter), and the chat's next update is handled."""
    recorder, told = Recorder(), Told()
    cancelled = asyncio.Event()
    stopped: list[bool] = []
    inner = poisoned(recorder, hanging="hangs", cancelled=cancelled)

    async def process(payload: str, parsed: Update | None) -> None:
        if json.loads(payload)["message"]["text"] == "/reset allowed":
            stopped.append(await stop_earlier())
        await inner(payload, parsed)

    options: dict[str, Any] = {"on_dead": told, "interrupting_commands": ("reset",)}
    running = await start_worker(process, **options)
    other = await start_worker(process, **options)
    updates = UpdateBuilder()
    await running.worker.accept(updates.text_message(CHAT, "hangs", user_id=CHAT))
    await recorder.until(lambda: len(recorder.started) == 1)
    after = updates.text_message(CHAT, "after", user_id=CHAT)
    await running.worker.accept(after)
    assert await other.worker.accept(updates.text_message(CHAT, "/reset refused", user_id=CHAT))
    await recorder.until(lambda: len(recorder.finished) == 1)  # the refused reset, handled
    assert not cancelled.is_set()
    assert await other.worker.accept(updates.text_message(CHAT, "/reset allowed", user_id=CHAT))
    async with asyncio.timeout(WAIT):
        await cancelled.wait()
    await recorder.until(lambda: (f"tg:{CHAT}", after["update_id"]) in recorder.finished)
    assert stopped == [True]
    assert told.told == []
    assert await letters(postgres_url) == []
    await until(inbox_empty(running), "the inbox emptied")


async def test_a_dead_letter_replayed_is_handled_again_and_one_dropped_is_gone(
    start_worker: Start,  # noqa: F811
    postgres_url: str,  # noqa: F811
) -> None:
    """Replay moves the letter back into the inbox with its attempts at 0 and wakes the
    workers; drop deletes it; neither finds a letter that is not there."""
    recorder, told = Recorder(), Told()
    broken = {"poison"}
    inner = poisoned(recorder)

    async def process(payload: str, parsed: Update | None) -> None:
        if json.loads(payload)["message"]["text"] in broken:
            raise RuntimeError("broken for now")
        await inner(payload, parsed)

    worker = await start_worker(process, on_dead=told)
    updates = UpdateBuilder()
    poison = updates.text_message(CHAT, "poison", user_id=CHAT)
    await worker.worker.accept(poison)
    await told.until(1)
    broken.clear()  # the operator fixed what broke it
    db = await asyncpg.connect(postgres_url)
    try:
        assert await replay(db, poison["update_id"]) is True
        assert await replay(db, poison["update_id"]) is False
        await recorder.until(lambda: len(recorder.finished) == 1)
        assert recorder.finished == [(f"tg:{CHAT}", poison["update_id"])]
        assert await dead_letters(db) == []
        assert await worker.worker.accept(poison) is False  # still a redelivery
        second = updates.text_message(CHAT, "poison", user_id=CHAT)
        broken.add("poison")
        await worker.worker.accept(second)
        await told.until(2)
        assert await drop(db, second["update_id"]) is True
        assert await drop(db, second["update_id"]) is False
        assert await dead_letters(db) == []
    finally:
        await db.close()
