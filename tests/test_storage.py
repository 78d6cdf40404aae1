"""SqliteStore against real SQLite files: schema, round trips, durability, concurrency."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

from core.errors import SessionNotFound
from core.models import ChatSettings, Consultation, Message, ModelOptions, Role, Status, Usage
from core.ports import ConsultationStore
from storage import ActiveConsultationExists, SqliteStore
from storage.migrations import MIGRATIONS, applied_migrations, migrate

ROOT = Path(__file__).resolve().parent.parent
INJECTION = "'); DROP TABLE consultations; -- \" OR 1=1; SELECT * FROM messages WHERE '1'='1"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "bot.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(db_path)
    yield opened
    await opened.close()


def make(
    chat_key: str = "chat:1",
    *,
    messages: list[Message] | None = None,
    at: float = 1000.0,
    **fields: object,
) -> Consultation:
    text = "How do I choose a database?"
    return Consultation(
        id=str(uuid.uuid4()),
        chat_key=chat_key,
        max_rounds=3,
        initial_request=text,
        created_at=at,
        last_activity_at=at,
        messages=[Message(Role.USER, text, at, author="Ann")] if messages is None else messages,
        **fields,  # type: ignore[arg-type]
    )


async def count(path: Path, sql: str, *params: object) -> int:
    async with aiosqlite.connect(path) as db:
        rows = list(await db.execute_fetchall(sql, params))
    return int(rows[0][0])


async def test_store_satisfies_the_port(store: SqliteStore) -> None:
    """SqliteStore is usable wherever the engine expects a ConsultationStore."""
    port: ConsultationStore = store
    assert await port.load_active("nobody") is None
    assert await store.ping()


async def test_blank_database_is_migrated(db_path: Path, store: SqliteStore) -> None:
    """Opening a missing file creates its folder, the schema, WAL mode and the migration log."""
    assert db_path.exists()  # noqa: ASYNC240 (a stat of a local file in a test)
    async with aiosqlite.connect(db_path) as db:
        assert await applied_migrations(db) == [m.__name__ for m in MIGRATIONS]
        tables = {
            row[0]
            for row in await db.execute_fetchall(
                "SELECT name FROM sqlite_master WHERE type='table'"
            )
        }
        (mode,) = next(iter(await db.execute_fetchall("PRAGMA journal_mode")))
    assert {"consultations", "messages", "chat_settings", "schema_migrations"} <= tables
    assert mode == "wal"


async def test_reopen_keeps_data_and_does_not_rerun_migrations(db_path: Path) -> None:
    """A second open finds the data and applies no migration again."""
    store = await SqliteStore.open(db_path)
    consultation = make()
    await store.create(consultation)
    await store.close()
    before = await count(db_path, "SELECT COUNT(*) FROM schema_migrations")

    store = await SqliteStore.open(db_path)
    try:
        assert await store.get(consultation.id) == consultation
    finally:
        await store.close()
    assert await count(db_path, "SELECT COUNT(*) FROM schema_migrations") == before
    async with aiosqlite.connect(db_path, isolation_level=None) as db:
        assert await migrate(db) == []


async def test_failed_migration_leaves_nothing_behind(tmp_path: Path) -> None:
    """A migration that fails is rolled back whole and not recorded; earlier ones stay."""

    async def m001_ok(db: aiosqlite.Connection) -> None:
        await db.execute("CREATE TABLE kept (x)")

    async def m002_broken(db: aiosqlite.Connection) -> None:
        await db.execute("CREATE TABLE half (x)")
        await db.execute("THIS IS NOT SQL")

    async with aiosqlite.connect(tmp_path / "m.db", isolation_level=None) as db:
        with pytest.raises(aiosqlite.OperationalError):
            await migrate(db, [m001_ok, m002_broken])
        assert await applied_migrations(db) == ["m001_ok"]
        names = {r[0] for r in await db.execute_fetchall("SELECT name FROM sqlite_master")}
        assert "kept" in names
        assert "half" not in names
        assert await migrate(db, [m001_ok]) == []


async def test_round_trip_keeps_options_order_authors_and_usage(store: SqliteStore) -> None:
    """What create stores, load_active and get return equal, field for field."""
    options = ModelOptions(
        model="sonar-pro",
        max_tokens=512,
        disable_search=True,
        output_format="json",
        output_schema='{"type": "object"}',
    )
    messages = [
        Message(Role.USER, "first", 1.0, author="Ann"),
        Message(Role.ASSISTANT, "question?", 2.0, usage=Usage(10, 20)),
        Message(Role.USER, "answer", 3.0, author="Bob"),
        Message(Role.USER, "more", 3.5, author=None),
    ]
    consultation = make(
        messages=messages,
        options=options,
        role="lawyer",
        system_prompt="Be brief.",
        current_round=1,
    )
    await store.create(consultation)

    assert await store.load_active("chat:1") == consultation
    loaded = await store.get(consultation.id)
    assert loaded == consultation
    assert loaded is not None
    assert [m.text for m in loaded.open_turn] == ["answer", "more"]
    assert await store.get(str(uuid.uuid4())) is None


async def test_consultation_without_messages_round_trips(store: SqliteStore) -> None:
    """A consultation created with no messages loads with an empty list, default options."""
    consultation = make(messages=[])
    await store.create(consultation)
    assert await store.get(consultation.id) == consultation


async def test_open_turn_survives_reopen(db_path: Path) -> None:
    """A user message added and committed is still the open turn after a restart."""
    store = await SqliteStore.open(db_path)
    consultation = make()
    await store.create(consultation)
    await store.record_reply(
        consultation.id,
        Message(Role.ASSISTANT, "Which workload?", 1001.0),
        current_round=1,
        status=Status.ACTIVE,
        last_activity_at=1001.0,
    )
    await store.add_message(
        consultation.id, Message(Role.USER, "Mostly reads", 1002.0), last_activity_at=1002.0
    )
    await store.close()

    store = await SqliteStore.open(db_path)
    try:
        resumed = await store.load_active("chat:1")
    finally:
        await store.close()
    assert resumed is not None
    assert resumed.current_round == 1
    assert resumed.last_activity_at == 1002.0
    assert [m.text for m in resumed.open_turn] == ["Mostly reads"]


async def test_committed_message_survives_process_kill(db_path: Path) -> None:
    """A message whose add_message returned is on disk even if the process is SIGKILLed."""
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal
        from core.models import Consultation, Message, Role
        from storage import SqliteStore

        async def main():
            store = await SqliteStore.open({str(db_path)!r})
            c = Consultation("c1", "chat:k", 3, "hello", 1.0, 1.0,
                             messages=[Message(Role.USER, "hello", 1.0)])
            await store.create(c)
            await store.add_message("c1", Message(Role.USER, "still here", 2.0),
                                    last_activity_at=2.0)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
        """
    )
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", script, cwd=ROOT)
    assert await process.wait() == -signal.SIGKILL
    # Never checkpointed: the commit is only in the WAL the killed process left.
    assert os.path.exists(f"{db_path}-wal")  # noqa: ASYNC240

    store = await SqliteStore.open(db_path)
    try:
        resumed = await store.load_active("chat:k")
    finally:
        await store.close()
    assert resumed is not None
    assert [m.text for m in resumed.messages] == ["hello", "still here"]


async def test_record_reply_advances_round_and_status_together(store: SqliteStore) -> None:
    """The final reply, the round and COMPLETE are stored together; the chat has no active one."""
    consultation = make()
    await store.create(consultation)
    reply = Message(Role.ASSISTANT, "Final answer", 1005.0, usage=Usage(100, 900))
    await store.record_reply(
        consultation.id, reply, current_round=3, status=Status.COMPLETE, last_activity_at=1005.0
    )
    assert await store.load_active("chat:1") is None
    done = await store.get(consultation.id)
    assert done is not None
    assert (done.current_round, done.status, done.last_activity_at) == (3, Status.COMPLETE, 1005.0)
    assert done.messages[-1] == reply


async def test_write_to_unknown_consultation_raises_and_changes_nothing(
    db_path: Path, store: SqliteStore
) -> None:
    """Writes naming a missing id raise SessionNotFound, roll back, and leave the store usable."""
    missing = str(uuid.uuid4())
    with pytest.raises(SessionNotFound):
        await store.add_message(missing, Message(Role.USER, "x", 1.0), last_activity_at=1.0)
    with pytest.raises(SessionNotFound):
        await store.record_reply(
            missing,
            Message(Role.ASSISTANT, "x", 1.0),
            current_round=1,
            status=Status.ACTIVE,
            last_activity_at=1.0,
        )
    with pytest.raises(SessionNotFound):
        await store.set_status(missing, Status.RESET, at=1.0)
    with pytest.raises(SessionNotFound):
        await store.set_max_rounds(missing, 5)
    assert await count(db_path, "SELECT COUNT(*) FROM messages") == 0
    await store.create(make())
    assert await count(db_path, "SELECT COUNT(*) FROM consultations") == 1


async def test_failing_write_does_not_spoil_writes_batched_with_it(
    db_path: Path, store: SqliteStore
) -> None:
    """Writes submitted together share a commit, but one that fails is rolled back alone."""
    consultation = make()
    await store.create(consultation)
    results = await asyncio.gather(
        store.add_message(consultation.id, Message(Role.USER, "a", 2.0), last_activity_at=2.0),
        store.add_message("missing", Message(Role.USER, "lost", 3.0), last_activity_at=3.0),
        store.create(make()),  # a second ACTIVE consultation in the same chat
        store.create(make("chat:2")),
        store.add_message(consultation.id, Message(Role.USER, "b", 4.0), last_activity_at=4.0),
        return_exceptions=True,
    )
    assert isinstance(results[1], SessionNotFound)
    assert isinstance(results[2], ActiveConsultationExists)
    assert [r for i, r in enumerate(results) if i not in (1, 2)] == [None, None, None]
    loaded = await store.load_active("chat:1")
    assert loaded is not None
    assert [m.text for m in loaded.messages][1:] == ["a", "b"]
    assert loaded.last_activity_at == 4.0
    assert await store.load_active("chat:2") is not None
    assert await count(db_path, "SELECT COUNT(*) FROM consultations") == 2


async def test_close_commits_writes_already_submitted(db_path: Path) -> None:
    """Closing the store waits for pending writes instead of dropping them."""
    store = await SqliteStore.open(db_path)
    consultation = make()
    await store.create(consultation)
    pending = [
        asyncio.create_task(
            store.add_message(
                consultation.id, Message(Role.USER, f"m{i}", 2.0), last_activity_at=2.0
            )
        )
        for i in range(5)
    ]
    await asyncio.sleep(0)  # the writes are submitted, not yet committed
    await store.close()
    await asyncio.gather(*pending)
    store = await SqliteStore.open(db_path)
    try:
        loaded = await store.get(consultation.id)
    finally:
        await store.close()
    assert loaded is not None
    assert [m.text for m in loaded.messages][1:] == [f"m{i}" for i in range(5)]


async def test_only_one_active_consultation_per_chat(store: SqliteStore) -> None:
    """A second ACTIVE consultation in a chat is refused until the first one ends."""
    first = make()
    await store.create(first)
    with pytest.raises(ActiveConsultationExists):
        await store.create(make())
    await store.create(make("chat:2"))  # other chats are independent
    await store.set_status(first.id, Status.RESET, at=1010.0)
    second = make(at=1011.0)
    await store.create(second)
    active = await store.load_active("chat:1")
    assert active is not None
    assert active.id == second.id
    reset = await store.get(first.id)
    assert reset is not None
    assert (reset.status, reset.last_activity_at) == (Status.RESET, 1010.0)


async def test_set_max_rounds_persists(store: SqliteStore) -> None:
    """A changed limit applies to the stored consultation."""
    consultation = make()
    await store.create(consultation)
    await store.set_max_rounds(consultation.id, 7)
    loaded = await store.get(consultation.id)
    assert loaded is not None
    assert loaded.max_rounds == 7


async def test_chat_settings_default_then_saved(store: SqliteStore) -> None:
    """A chat with nothing saved gets ChatSettings(); a save replaces every field."""
    assert await store.load_chat_settings("chat:1") == ChatSettings()
    first = ChatSettings(max_rounds=5, role="doctor", system_prompt="Careful.", language="ru")
    await store.save_chat_settings("chat:1", first)
    assert await store.load_chat_settings("chat:1") == first
    await store.save_chat_settings("chat:1", ChatSettings(max_rounds=2))
    assert await store.load_chat_settings("chat:1") == ChatSettings(max_rounds=2)
    assert await store.load_chat_settings("chat:2") == ChatSettings()


async def test_expire_idle_marks_only_idle_active_ones(store: SqliteStore) -> None:
    """Active consultations idle since before the cut-off expire; others are untouched."""
    idle, fresh, done = make("a", at=100.0), make("b", at=900.0), make("c", at=50.0)
    for consultation in (idle, fresh, done):
        await store.create(consultation)
    await store.set_status(done.id, Status.COMPLETE, at=60.0)

    assert await store.expire_idle(inactive_since=500.0, at=1000.0) == 1
    assert await store.expire_idle(inactive_since=500.0, at=1000.0) == 0
    expired = await store.get(idle.id)
    assert expired is not None
    assert (expired.status, expired.last_activity_at) == (Status.EXPIRED, 100.0)
    assert await store.load_active("a") is None
    assert await store.load_active("b") is not None
    kept = await store.get(done.id)
    assert kept is not None
    assert kept.status is Status.COMPLETE


async def test_purge_deletes_old_finished_consultations_and_their_messages(
    db_path: Path, store: SqliteStore
) -> None:
    """Old ended consultations go with their messages; active, recent ones and settings stay."""
    old_done, old_active, new_done = make("a", at=10.0), make("b", at=10.0), make("c", at=10.0)
    for consultation in (old_done, old_active, new_done):
        await store.create(consultation)
    await store.set_status(old_done.id, Status.COMPLETE, at=20.0)
    await store.set_status(new_done.id, Status.RESET, at=500.0)
    await store.save_chat_settings("a", ChatSettings(max_rounds=4))

    assert await store.purge(older_than=100.0) == 1
    assert await store.get(old_done.id) is None
    assert await store.get(old_active.id) is not None
    assert await store.get(new_done.id) is not None
    assert await store.load_chat_settings("a") == ChatSettings(max_rounds=4)
    assert (
        await count(db_path, "SELECT COUNT(*) FROM messages WHERE consultation_id = ?", old_done.id)
        == 0
    )
    assert await count(db_path, "SELECT COUNT(*) FROM messages") == 2


async def test_hundred_concurrent_writers_lose_nothing(db_path: Path, store: SqliteStore) -> None:
    """100 coroutines creating and advancing consultations at once: every row lands, in order."""
    rounds = 3

    async def chat(n: int) -> str:
        consultation = make(f"chat:{n}", at=float(n))
        await store.create(consultation)
        for k in range(1, rounds + 1):
            await store.record_reply(
                consultation.id,
                Message(Role.ASSISTANT, f"reply {k}", float(n + k)),
                current_round=k,
                status=Status.COMPLETE if k == rounds else Status.ACTIVE,
                last_activity_at=float(n + k),
            )
            if k < rounds:
                await store.add_message(
                    consultation.id,
                    Message(Role.USER, f"user {k}", float(n + k)),
                    last_activity_at=float(n + k),
                )
            await store.save_chat_settings(f"chat:{n}", ChatSettings(max_rounds=k))
        return consultation.id

    ids = await asyncio.gather(*(chat(n) for n in range(100)))

    assert await count(db_path, "SELECT COUNT(*) FROM consultations") == 100
    assert await count(db_path, "SELECT COUNT(*) FROM messages") == 100 * (1 + 2 * rounds - 1)
    assert await count(db_path, "SELECT COUNT(*) FROM chat_settings") == 100
    for consultation_id in ids:
        loaded = await store.get(consultation_id)
        assert loaded is not None
        assert loaded.status is Status.COMPLETE
        assert loaded.current_round == rounds
        texts = [m.text for m in loaded.messages]
        assert texts[1:] == ["reply 1", "user 1", "reply 2", "user 2", "reply 3"]


async def test_reads_never_see_half_a_transaction(store: SqliteStore) -> None:
    """While replies are recorded concurrently, every read has one reply per completed round."""
    consultations = [make(f"chat:{n}") for n in range(10)]
    for consultation in consultations:
        await store.create(consultation)
    stop = asyncio.Event()

    async def writer(consultation: Consultation) -> None:
        for k in range(1, 21):
            await store.record_reply(
                consultation.id,
                Message(Role.ASSISTANT, f"r{k}", float(k)),
                current_round=k,
                status=Status.ACTIVE,
                last_activity_at=float(k),
            )

    async def reader() -> int:
        seen = 0
        while not stop.is_set():
            for consultation in consultations:
                loaded = await store.get(consultation.id)
                assert loaded is not None
                replies = sum(m.role is Role.ASSISTANT for m in loaded.messages)
                assert replies == loaded.current_round
                seen += 1
        return seen

    readers = [asyncio.create_task(reader()) for _ in range(3)]
    await asyncio.gather(*(writer(c) for c in consultations))
    stop.set()
    assert all(n > 0 for n in await asyncio.gather(*readers))


async def test_cancelled_write_leaves_store_consistent(db_path: Path, store: SqliteStore) -> None:
    """A write cancelled at any point is all-or-nothing and the next write still works."""
    consultation = make()
    await store.create(consultation)
    for delay in range(8):
        task = asyncio.create_task(
            store.add_message(
                consultation.id, Message(Role.USER, f"m{delay}", 1.0), last_activity_at=1.0
            )
        )
        for _ in range(delay):
            await asyncio.sleep(0)
        task.cancel()  # a no-op if the write already finished: either outcome must be whole
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await store.set_max_rounds(consultation.id, 3 + delay)
    await store.add_message(consultation.id, Message(Role.USER, "last", 2.0), last_activity_at=2.0)
    loaded = await store.get(consultation.id)
    assert loaded is not None
    assert loaded.max_rounds == 10
    assert loaded.messages[-1].text == "last"
    assert await count(db_path, "SELECT COUNT(*) FROM messages") == len(loaded.messages)


async def test_injection_looking_text_is_stored_verbatim(store: SqliteStore) -> None:
    """Text that looks like SQL is data: stored and returned byte for byte."""
    consultation = make(
        INJECTION,
        messages=[Message(Role.USER, INJECTION, 1.0, author=INJECTION)],
        system_prompt=INJECTION,
        role=INJECTION,
        options=ModelOptions(model=INJECTION, output_schema=INJECTION),
    )
    await store.create(consultation)
    await store.add_message(
        consultation.id, Message(Role.USER, INJECTION, 2.0, author=INJECTION), last_activity_at=2.0
    )
    await store.save_chat_settings(INJECTION, ChatSettings(role=INJECTION, language=INJECTION))

    loaded = await store.load_active(INJECTION)
    assert loaded is not None
    assert loaded.system_prompt == INJECTION
    assert loaded.options.model == INJECTION
    assert [(m.text, m.author) for m in loaded.messages] == [(INJECTION, INJECTION)] * 2
    assert await store.load_chat_settings(INJECTION) == ChatSettings(
        role=INJECTION, language=INJECTION
    )
    assert await store.load_active("chat:1") is None


async def test_starter_of_a_consultation_round_trips(store: SqliteStore) -> None:
    """Who opened a consultation (migration m002) is kept, and absent means None."""
    with_starter = make("chat:starter", started_by=4242)
    without = make("chat:nobody")
    await store.create(with_starter)
    await store.create(without)
    loaded = await store.load_active("chat:starter")
    assert loaded is not None and loaded.started_by == 4242
    other = await store.get(without.id)
    assert other is not None and other.started_by is None


async def test_latest_status_is_the_most_recently_active(store: SqliteStore) -> None:
    """latest_status reports the chat's newest consultation, None for an unknown chat."""
    assert await store.latest_status("chat:none") is None
    old = make("chat:l", at=100.0)
    await store.create(old)
    await store.set_status(old.id, Status.EXPIRED, at=200.0)
    assert await store.latest_status("chat:l") is Status.EXPIRED
    await store.create(make("chat:l", at=300.0))
    assert await store.latest_status("chat:l") is Status.ACTIVE


async def test_move_chat_carries_consultations_and_settings(store: SqliteStore) -> None:
    """A re-keyed chat keeps its active consultation and settings under the new key."""
    active = make("tg:-5")
    await store.create(active)
    await store.save_chat_settings("tg:-5", ChatSettings(max_rounds=4))
    assert await store.move_chat("tg:-5", "tg:-1005") == 1
    moved = await store.load_active("tg:-1005")
    assert moved is not None and moved.id == active.id
    assert await store.load_active("tg:-5") is None
    assert (await store.load_chat_settings("tg:-1005")).max_rounds == 4
    assert await store.load_chat_settings("tg:-5") == ChatSettings()


async def test_move_chat_never_leaves_two_active_consultations(store: SqliteStore) -> None:
    """If the new key already has an active consultation it stays; the old one is reset."""
    old, new = make("tg:-6"), make("tg:-1006")
    await store.create(old)
    await store.create(new)
    await store.move_chat("tg:-6", "tg:-1006")
    current = await store.load_active("tg:-1006")
    assert current is not None and current.id == new.id
    moved = await store.get(old.id)
    assert moved is not None and moved.status is Status.RESET and moved.chat_key == "tg:-1006"


async def test_retention_counts_from_the_last_activity_not_from_expiry(
    store: SqliteStore,
) -> None:
    """Expired consultations (by the cleanup or when next used) are purged a retention
    period after their last message, however late they were found idle."""
    swept, touched = make("a", at=100.0), make("b", at=100.0)
    for consultation in (swept, touched):
        await store.create(consultation)
    # Found idle only at t=5000, e.g. after the service was down for a long time.
    await store.set_status(touched.id, Status.EXPIRED, at=5000.0)
    assert await store.expire_idle(inactive_since=4000.0, at=5000.0) == 1
    assert await store.purge(older_than=101.0) == 2
    assert await store.get(swept.id) is None and await store.get(touched.id) is None


async def test_update_ids_are_remembered_for_a_day_and_no_longer(
    db_path: Path, store: SqliteStore
) -> None:
    """A repeat within a day is recognised; older ids are deleted as new ones arrive,
    so the table stays bounded."""
    assert await store.remember_update(100, at=0.0)
    assert not await store.remember_update(100, at=10.0)
    assert await store.remember_update(101, at=20.0)
    assert await store.remember_update(102, at=86_430.0)  # a day after the first two
    assert await count(db_path, "SELECT COUNT(*) FROM telegram_updates") == 1
    assert await store.remember_update(100, at=86_440.0)  # forgotten: Telegram gave up long ago
    assert await store.remember_update(2_000_102, at=86_450.0)  # a million ids later
    assert await count(db_path, "SELECT COUNT(*) FROM telegram_updates") == 1
