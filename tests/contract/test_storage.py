"""The store contract: what every `ConsultationStore` implementation must do, run against
each one in `tests.store_contract.STORE_KINDS` (SQLite and PostgreSQL) on a real database —
round trips, atomic writes, one ACTIVE consultation per chat, compare-and-set of the
round, and several writers at once (one store, or two stores on one database as two
worker processes would have). What only SQLite has is in tests/storage/test_storage_sqlite.py."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from core.domain.clarifying import Answer, ClarifyingRound, Picks, Question
from core.domain.consultation import (
    SUMMARY_CHARS,
    ChatSettings,
    Consultation,
    Message,
    ModelOptions,
    Role,
    Status,
    Usage,
)
from core.domain.errors import (
    ActiveConsultationExists,
    SessionNotFound,
    StoreUnavailable,
    TurnSuperseded,
)
from core.domain.facts import MAX_FACT_CHARS, MAX_FACTS, MemoryPreferences
from core.domain.usage import CallKind, Charge, ScopeKind
from tests.store_contract import Rows, StoreKind, make

if TYPE_CHECKING:
    from app.stores import Store

INJECTION = "'); DROP TABLE consultations; -- \" OR 1=1; SELECT * FROM messages WHERE '1'='1"


async def test_round_trip_keeps_options_order_authors_and_usage(store: Store) -> None:
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


async def test_consultation_without_messages_round_trips(store: Store) -> None:
    """A consultation created with no messages loads with an empty list, default options."""
    consultation = make(messages=[])
    await store.create(consultation)
    assert await store.get(consultation.id) == consultation


async def test_open_turn_survives_reopen(kind: StoreKind, database: str) -> None:
    """A user message added and committed is still the open turn after a restart."""
    store = await kind.open(database)
    consultation = make()
    await store.create(consultation)
    await store.record_reply(
        consultation.id,
        Message(Role.ASSISTANT, "Which workload?", 1001.0),
        expected_round=0,
        current_round=1,
        status=Status.ACTIVE,
        last_activity_at=1001.0,
    )
    await store.add_message(
        consultation.id, Message(Role.USER, "Mostly reads", 1002.0), last_activity_at=1002.0
    )
    await store.close()

    store = await kind.open(database)
    try:
        resumed = await store.load_active("chat:1")
    finally:
        await store.close()
    assert resumed is not None
    assert resumed.current_round == 1
    assert resumed.last_activity_at == 1002.0
    assert [m.text for m in resumed.open_turn] == ["Mostly reads"]


async def test_record_reply_advances_round_and_status_together(store: Store) -> None:
    """The final reply, the round and COMPLETE are stored together; the chat has no active one."""
    consultation = make()
    await store.create(consultation)
    reply = Message(Role.ASSISTANT, "Final answer", 1005.0, usage=Usage(100, 900))
    await store.record_reply(
        consultation.id,
        reply,
        expected_round=0,
        current_round=3,
        status=Status.COMPLETE,
        last_activity_at=1005.0,
    )
    assert await store.load_active("chat:1") is None
    done = await store.get(consultation.id)
    assert done is not None
    assert (done.current_round, done.status, done.last_activity_at) == (3, Status.COMPLETE, 1005.0)
    assert done.messages[-1] == reply


async def test_write_to_unknown_consultation_raises_and_changes_nothing(
    rows: Rows, store: Store
) -> None:
    """Writes naming a missing id raise SessionNotFound, roll back, and leave the store usable."""
    missing = str(uuid.uuid4())
    with pytest.raises(SessionNotFound):
        await store.add_message(missing, Message(Role.USER, "x", 1.0), last_activity_at=1.0)
    with pytest.raises(SessionNotFound):
        await store.record_reply(
            missing,
            Message(Role.ASSISTANT, "x", 1.0),
            expected_round=0,
            current_round=1,
            status=Status.ACTIVE,
            last_activity_at=1.0,
        )
    with pytest.raises(SessionNotFound):
        await store.set_status(missing, Status.RESET, at=1.0)
    with pytest.raises(SessionNotFound):
        await store.set_max_rounds(missing, 5)
    with pytest.raises(SessionNotFound):
        await store.set_options(missing, ModelOptions(model="sonar"))
    assert await rows("messages") == 0
    await store.create(make())
    assert await rows("consultations") == 1


async def test_failing_write_does_not_spoil_writes_batched_with_it(
    rows: Rows, store: Store
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
    assert await rows("consultations") == 2


async def test_close_commits_writes_already_submitted(kind: StoreKind, database: str) -> None:
    """Closing the store waits for pending writes instead of dropping them."""
    store = await kind.open(database)
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
    store = await kind.open(database)
    try:
        loaded = await store.get(consultation.id)
    finally:
        await store.close()
    assert loaded is not None
    assert [m.text for m in loaded.messages][1:] == [f"m{i}" for i in range(5)]


async def test_only_one_active_consultation_per_chat(store: Store) -> None:
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


async def test_set_max_rounds_persists(store: Store) -> None:
    """A changed limit applies to the stored consultation."""
    consultation = make()
    await store.create(consultation)
    await store.set_max_rounds(consultation.id, 7)
    loaded = await store.get(consultation.id)
    assert loaded is not None
    assert loaded.max_rounds == 7


async def test_set_options_replaces_them_and_keeps_the_rest(store: Store) -> None:
    """The stored options become the ones given (the chat's model from the next call);
    the consultation's messages and round stay."""
    consultation = make()
    consultation.options = ModelOptions(model="test-model", max_tokens=300)
    await store.create(consultation)
    await store.set_options(consultation.id, ModelOptions(model="sonar", max_tokens=300))
    loaded = await store.get(consultation.id)
    assert loaded is not None
    assert loaded.options == ModelOptions(model="sonar", max_tokens=300)
    assert (loaded.messages, loaded.current_round) == (consultation.messages, 0)


async def test_a_chats_model_is_kept_with_its_settings_and_moves_with_the_chat(
    store: Store,
) -> None:
    """`ChatSettings.model` round trips verbatim (any text: it is checked against
    LLM_MODELS where it is used), survives other settings' saves and a re-keyed chat."""
    await store.save_chat_settings("tg:-5", ChatSettings(model=INJECTION))
    assert (await store.load_chat_settings("tg:-5")).model == INJECTION
    await store.save_chat_settings("tg:-5", ChatSettings(max_rounds=4, model="sonar"))
    await store.move_chat("tg:-5", "tg:-1005")
    assert await store.load_chat_settings("tg:-1005") == ChatSettings(max_rounds=4, model="sonar")
    assert await store.load_chat_settings("tg:-5") == ChatSettings()


async def test_chat_settings_default_then_saved(store: Store) -> None:
    """A chat with nothing saved gets ChatSettings(); a save replaces every field."""
    assert await store.load_chat_settings("chat:1") == ChatSettings()
    first = ChatSettings(
        max_rounds=5, role="doctor", system_prompt="Careful.", language="ru", model="sonar"
    )
    await store.save_chat_settings("chat:1", first)
    assert await store.load_chat_settings("chat:1") == first
    await store.save_chat_settings("chat:1", ChatSettings(max_rounds=2))
    assert await store.load_chat_settings("chat:1") == ChatSettings(max_rounds=2)
    assert await store.load_chat_settings("chat:2") == ChatSettings()


async def test_expire_idle_marks_only_idle_active_ones(store: Store) -> None:
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
    rows: Rows, store: Store
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
    assert await rows("messages", consultation_id=old_done.id) == 0
    assert await rows("messages") == 2


async def test_hundred_concurrent_writers_lose_nothing(rows: Rows, store: Store) -> None:
    """100 coroutines creating and advancing consultations at once: every row lands, in order."""
    rounds = 3

    async def chat(n: int) -> str:
        consultation = make(f"chat:{n}", at=float(n))
        await store.create(consultation)
        for k in range(1, rounds + 1):
            await store.record_reply(
                consultation.id,
                Message(Role.ASSISTANT, f"reply {k}", float(n + k)),
                expected_round=k - 1,
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

    assert await rows("consultations") == 100
    assert await rows("messages") == 100 * (1 + 2 * rounds - 1)
    assert await rows("chat_settings") == 100
    for consultation_id in ids:
        loaded = await store.get(consultation_id)
        assert loaded is not None
        assert loaded.status is Status.COMPLETE
        assert loaded.current_round == rounds
        texts = [m.text for m in loaded.messages]
        assert texts[1:] == ["reply 1", "user 1", "reply 2", "user 2", "reply 3"]


async def test_reads_never_see_half_a_transaction(store: Store) -> None:
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
                expected_round=k - 1,
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


async def test_cancelled_write_leaves_store_consistent(rows: Rows, store: Store) -> None:
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
    assert await rows("messages") == len(loaded.messages)


async def test_injection_looking_text_is_stored_verbatim(store: Store) -> None:
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


async def test_starter_of_a_consultation_round_trips(store: Store) -> None:
    """Who opened a consultation (migration m002) is kept, and absent means None."""
    with_starter = make("chat:starter", started_by=4242)
    without = make("chat:nobody")
    await store.create(with_starter)
    await store.create(without)
    loaded = await store.load_active("chat:starter")
    assert loaded is not None and loaded.started_by == 4242
    other = await store.get(without.id)
    assert other is not None and other.started_by is None


async def test_latest_status_is_the_most_recently_active(store: Store) -> None:
    """latest_status reports the chat's newest consultation, None for an unknown chat."""
    assert await store.latest_status("chat:none") is None
    old = make("chat:l", at=100.0)
    await store.create(old)
    await store.set_status(old.id, Status.EXPIRED, at=200.0)
    assert await store.latest_status("chat:l") is Status.EXPIRED
    await store.create(make("chat:l", at=300.0))
    assert await store.latest_status("chat:l") is Status.ACTIVE


async def test_recent_lists_a_chats_newest_consultations_first_within_the_limit(
    store: Store,
) -> None:
    """recent: the chat's consultations newest first (any status), at most `limit`, each
    with the start of its request and where it stands; other chats never appear."""
    made = [make("chat:h", at=100.0 + n) for n in range(4)]
    for consultation in made[:3]:
        await store.create(consultation)
        await store.set_status(consultation.id, Status.COMPLETE, at=consultation.created_at)
    await store.create(made[3])
    await store.create(make("chat:other", at=500.0))
    await store.set_max_rounds(made[3].id, 5)

    found = await store.recent("chat:h", 3)

    assert [s.id for s in found] == [made[3].id, made[2].id, made[1].id]
    assert [s.status for s in found] == [Status.ACTIVE, Status.COMPLETE, Status.COMPLETE]
    newest = found[0]
    assert (newest.created_at, newest.last_activity_at) == (103.0, 103.0)
    assert (newest.current_round, newest.max_rounds) == (0, 5)
    assert newest.request == "How do I choose a database?"
    assert [s.id for s in await store.recent("chat:h", 10)][-1] == made[0].id
    assert await store.recent("chat:none", 10) == []


async def test_recent_keeps_the_start_of_a_long_request_and_drops_purged_ones(
    store: Store,
) -> None:
    """A summary holds the first SUMMARY_CHARS characters of the request (Cyrillic counted
    as characters); a purged consultation is gone from the history; ties keep one order."""
    request = "Ж" * (SUMMARY_CHARS + 50)
    old, kept, twin = (
        make("chat:p", at=10.0),
        dataclasses.replace(make("chat:p", at=200.0), initial_request=request),
        make("chat:p", at=200.0),
    )
    await store.create(old)
    await store.set_status(old.id, Status.EXPIRED, at=20.0)
    await store.create(kept)
    await store.set_status(kept.id, Status.RESET, at=300.0)
    await store.create(twin)
    assert await store.purge(older_than=100.0) == 1

    found = await store.recent("chat:p", 10)

    assert [s.id for s in found] == sorted((kept.id, twin.id), reverse=True)
    assert next(s for s in found if s.id == kept.id).request == "Ж" * SUMMARY_CHARS


async def test_move_chat_carries_consultations_and_settings(store: Store) -> None:
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


async def test_move_chat_never_leaves_two_active_consultations(store: Store) -> None:
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
    store: Store,
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


async def test_ping_is_true_while_usable_and_false_once_closed(
    kind: StoreKind, database: str
) -> None:
    """ping answers whether the store can serve now; it reports, never raises."""
    store = await kind.open(database)
    try:
        assert await store.ping() is True
    finally:
        await store.close()
    assert await store.ping() is False


async def reply(store: Store, consultation_id: str, text: str, *, expected: int, at: float) -> None:
    """Record an ACTIVE reply that advances the round from `expected` by one."""
    await store.record_reply(
        consultation_id,
        Message(Role.ASSISTANT, text, at),
        expected_round=expected,
        current_round=expected + 1,
        status=Status.ACTIVE,
        last_activity_at=at,
    )


async def test_record_reply_is_compare_and_set_on_the_round(store: Store, rows: Rows) -> None:
    """A second reply planned from the same round raises TurnSuperseded and changes nothing:
    not the messages, the round, the status or the last activity."""
    consultation = make()
    await store.create(consultation)
    await reply(store, consultation.id, "first", expected=0, at=1001.0)
    with pytest.raises(TurnSuperseded):
        await store.record_reply(
            consultation.id,
            Message(Role.ASSISTANT, "second", 1002.0),
            expected_round=0,
            current_round=1,
            status=Status.COMPLETE,
            last_activity_at=1002.0,
        )
    loaded = await store.get(consultation.id)
    assert loaded is not None
    assert [m.text for m in loaded.messages][1:] == ["first"]
    assert (loaded.current_round, loaded.status, loaded.last_activity_at) == (
        1,
        Status.ACTIVE,
        1001.0,
    )
    assert await rows("messages", consultation_id=consultation.id) == 2
    await reply(store, consultation.id, "next", expected=1, at=1003.0)  # the CAS moved on


async def test_reply_to_a_consultation_no_longer_active_is_superseded(store: Store) -> None:
    """Another writer reset the consultation while the turn ran: the reply is not stored
    and the consultation stays reset (it is never made ACTIVE again)."""
    consultation = make()
    await store.create(consultation)
    await store.set_status(consultation.id, Status.RESET, at=1001.0)
    with pytest.raises(TurnSuperseded):
        await reply(store, consultation.id, "late", expected=0, at=1002.0)
    loaded = await store.get(consultation.id)
    assert loaded is not None
    assert (loaded.status, len(loaded.messages), loaded.current_round) == (Status.RESET, 1, 0)


async def complete(store: Store, chat_key: str = "chat:1", *, at: float = 1000.0) -> str:
    """A consultation of `chat_key` answered in one round (COMPLETE); its id."""
    consultation = make(chat_key, at=at)
    await store.create(consultation)
    await store.record_reply(
        consultation.id,
        Message(Role.ASSISTANT, "Final answer", at + 1),
        expected_round=0,
        current_round=1,
        status=Status.COMPLETE,
        last_activity_at=at + 1,
    )
    return consultation.id


async def test_a_complete_consultation_takes_follow_ups_counted_without_a_round(
    store: Store,
) -> None:
    """A follow-up is appended to a COMPLETE consultation with add_message and answered with
    record_follow_up: the count and last activity move, the round and status do not."""
    consultation_id = await complete(store)
    question = Message(Role.USER, "And for writes?", 1010.0, author="Ann", turn_id="tg:7")
    await store.add_message(consultation_id, question, last_activity_at=1010.0)
    answer = Message(Role.ASSISTANT, "Use PostgreSQL.", 1011.0, usage=Usage(5, 7))
    await store.record_follow_up(
        consultation_id, answer, expected_follow_ups=0, last_activity_at=1011.0
    )
    loaded = await store.get(consultation_id)
    assert loaded is not None
    assert (loaded.status, loaded.current_round, loaded.follow_ups) == (Status.COMPLETE, 1, 1)
    assert loaded.last_activity_at == 1011.0
    assert loaded.messages[-2:] == [question, answer]
    found, _ = await store.load_turn("chat:1", "tg:7")
    assert found is not None and found.reply == answer and found.round == 2


async def test_record_follow_up_is_compare_and_set_on_the_count(store: Store, rows: Rows) -> None:
    """A second answer planned from the same count raises TurnSuperseded and stores nothing;
    so does an answer for a consultation that is not COMPLETE; an unknown id is
    SessionNotFound."""
    consultation_id = await complete(store)
    await store.record_follow_up(
        consultation_id,
        Message(Role.ASSISTANT, "first", 1010.0),
        expected_follow_ups=0,
        last_activity_at=1010.0,
    )
    with pytest.raises(TurnSuperseded):
        await store.record_follow_up(
            consultation_id,
            Message(Role.ASSISTANT, "second", 1011.0),
            expected_follow_ups=0,
            last_activity_at=1011.0,
        )
    active = make("chat:2")
    await store.create(active)
    with pytest.raises(TurnSuperseded):
        await store.record_follow_up(
            active.id,
            Message(Role.ASSISTANT, "x", 1.0),
            expected_follow_ups=0,
            last_activity_at=1.0,
        )
    with pytest.raises(SessionNotFound):
        await store.record_follow_up(
            str(uuid.uuid4()),
            Message(Role.ASSISTANT, "x", 1.0),
            expected_follow_ups=0,
            last_activity_at=1.0,
        )
    loaded = await store.get(consultation_id)
    assert loaded is not None
    assert (loaded.follow_ups, loaded.last_activity_at) == (1, 1010.0)
    assert [m.text for m in loaded.messages][1:] == ["Final answer", "first"]
    assert await rows("messages", consultation_id=active.id) == 1


async def test_concurrent_follow_up_answers_store_one(kind: StoreKind, database: str) -> None:
    """Two stores (two workers) answering the same follow-up at once: exactly one is stored."""
    first, second = await kind.open(database), await kind.open(database)
    try:
        consultation_id = await complete(first)
        results = await asyncio.gather(
            *(
                s.record_follow_up(
                    consultation_id,
                    Message(Role.ASSISTANT, text, 1010.0),
                    expected_follow_ups=0,
                    last_activity_at=1010.0,
                )
                for s, text in ((first, "a"), (second, "b"))
            ),
            return_exceptions=True,
        )
        loaded = await first.get(consultation_id)
    finally:
        await first.close()
        await second.close()
    assert sorted(type(r).__name__ for r in results) == ["NoneType", "TurnSuperseded"]
    assert loaded is not None and loaded.follow_ups == 1
    assert len(loaded.messages) == 3


async def test_load_latest_is_the_chat_newest_consultation_whatever_its_status(
    store: Store,
) -> None:
    """load_latest finds the chat's last created consultation, COMPLETE or ACTIVE, with its
    messages; never another chat's; None for a chat without one."""
    assert await store.load_latest("chat:1") is None
    older = await complete(store, at=1000.0)
    latest = await store.load_latest("chat:1")
    assert latest is not None and latest.id == older and len(latest.messages) == 2
    newer = make(at=2000.0)
    await store.create(newer)
    await complete(store, "chat:2", at=3000.0)
    latest = await store.load_latest("chat:1")
    assert latest is not None and (latest.id, latest.status) == (newer.id, Status.ACTIVE)


async def test_a_superseded_reply_does_not_spoil_writes_submitted_with_it(
    store: Store, rows: Rows
) -> None:
    """Replies of other chats and messages written at the same moment as a superseded
    reply all land; only the stale reply is refused."""
    stale, other = make("chat:stale"), make("chat:other")
    await store.create(stale)
    await store.create(other)
    await reply(store, stale.id, "won", expected=0, at=1001.0)
    results = await asyncio.gather(
        reply(store, other.id, "other 1", expected=0, at=1002.0),
        reply(store, stale.id, "lost", expected=0, at=1002.0),
        store.add_message(stale.id, Message(Role.USER, "more", 1003.0), last_activity_at=1003.0),
        return_exceptions=True,
    )
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], TurnSuperseded)
    loaded_other = await store.get(other.id)
    loaded_stale = await store.get(stale.id)
    assert loaded_other is not None and loaded_stale is not None
    assert [m.text for m in loaded_other.messages][1:] == ["other 1"]
    assert loaded_other.current_round == 1
    assert [m.text for m in loaded_stale.messages][1:] == ["won", "more"]
    assert await rows("messages") == 5


async def test_two_stores_on_one_database_create_one_active_consultation_per_chat(
    kind: StoreKind, database: str, store: Store
) -> None:
    """Two stores (two worker processes) creating the same chat's ACTIVE consultation at
    once: exactly one wins, the other raises ActiveConsultationExists naming the chat."""
    second = await kind.open(database)
    try:
        for n in range(10):
            key = f"chat:{n}"
            mine, theirs = make(key), make(key)
            results = await asyncio.gather(
                store.create(mine), second.create(theirs), return_exceptions=True
            )
            refused = [r for r in results if isinstance(r, ActiveConsultationExists)]
            assert len(refused) == 1 and results.count(None) == 1
            assert refused[0].chat_key == key
            active = await second.load_active(key)
            winner = mine if results[0] is None else theirs
            assert active is not None and active.id == winner.id
    finally:
        await second.close()


async def test_two_stores_recording_the_same_round_store_one_reply(
    kind: StoreKind, database: str, store: Store
) -> None:
    """Two stores recording a reply planned from the same round: exactly one is stored,
    the other raises TurnSuperseded."""
    second = await kind.open(database)
    try:
        consultation = make()
        await store.create(consultation)
        results = await asyncio.gather(
            reply(store, consultation.id, "mine", expected=0, at=1001.0),
            reply(second, consultation.id, "theirs", expected=0, at=1001.0),
            return_exceptions=True,
        )
        assert results.count(None) == 1
        assert sum(isinstance(r, TurnSuperseded) for r in results) == 1
        loaded = await second.get(consultation.id)
        assert loaded is not None
        assert loaded.current_round == 1
        assert [m.role for m in loaded.messages] == [Role.USER, Role.ASSISTANT]
    finally:
        await second.close()


# -- turn ids: a Telegram update found again by the turn it became ----------------------


async def test_turn_id_round_trips_on_user_messages(store: Store) -> None:
    """The turn id a user message was stored with comes back with it, from create and
    from add_message; messages without one load with None."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0, author="Ann", turn_id="tg:1")])
    await store.create(consultation)
    await reply(store, consultation.id, "question?", expected=0, at=2.0)
    await store.add_message(
        consultation.id, Message(Role.USER, "second", 3.0, turn_id="tg:2"), last_activity_at=3.0
    )
    loaded = await store.get(consultation.id)
    assert loaded is not None
    assert [m.turn_id for m in loaded.messages] == ["tg:1", None, "tg:2"]


async def test_find_turn_unanswered_is_the_open_turn(store: Store) -> None:
    """A turn stored but not answered: its consultation, the message, no reply, no round."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0, turn_id="tg:7")])
    await store.create(consultation)
    found = (await store.load_turn("chat:1", "tg:7"))[0]
    assert found is not None
    assert found.consultation == consultation
    assert found.message.text == "first"
    assert (found.reply, found.round) == (None, None)


async def test_find_turn_answered_gives_the_reply_that_followed(store: Store) -> None:
    """The first assistant message after the turn's message is its reply, with the round
    it answered; a later round's reply is not taken for it."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0, turn_id="tg:1")])
    await store.create(consultation)
    await reply(store, consultation.id, "question 1?", expected=0, at=2.0)
    await store.add_message(
        consultation.id, Message(Role.USER, "second", 3.0, turn_id="tg:2"), last_activity_at=3.0
    )
    await reply(store, consultation.id, "question 2?", expected=1, at=4.0)
    await store.add_message(
        consultation.id, Message(Role.USER, "third", 5.0, turn_id="tg:3"), last_activity_at=5.0
    )
    await reply(store, consultation.id, "question 3?", expected=2, at=6.0)

    found = (await store.load_turn("chat:1", "tg:2"))[0]
    assert found is not None
    assert found.consultation.id == consultation.id
    assert found.consultation.current_round == 3
    assert found.message.text == "second"
    assert found.reply is not None and found.reply.text == "question 2?"
    assert found.round == 2


async def test_find_turn_in_a_completed_consultation(store: Store) -> None:
    """A finished consultation is searched too: the chat's active one is not required."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0, turn_id="tg:9")])
    await store.create(consultation)
    await store.record_reply(
        consultation.id,
        Message(Role.ASSISTANT, "Final answer", 2.0),
        expected_round=0,
        current_round=1,
        status=Status.COMPLETE,
        last_activity_at=2.0,
    )
    await store.create(make(messages=[Message(Role.USER, "new one", 3.0, turn_id="tg:10")]))

    found = (await store.load_turn("chat:1", "tg:9"))[0]
    assert found is not None
    assert (found.consultation.id, found.consultation.status) == (consultation.id, Status.COMPLETE)
    assert found.reply is not None and found.reply.text == "Final answer"
    assert found.round == 1


async def test_find_turn_is_scoped_to_the_chat_and_knows_no_unknown_ids(store: Store) -> None:
    """Another chat's turn id is not found in this chat; an id never stored is not found."""
    await store.create(make("chat:other", messages=[Message(Role.USER, "x", 1.0, turn_id="tg:5")]))
    await store.create(make("chat:1", messages=[Message(Role.USER, "y", 1.0, turn_id="tg:6")]))
    assert (await store.load_turn("chat:1", "tg:5"))[0] is None
    assert (await store.load_turn("chat:1", "tg:404"))[0] is None
    found = (await store.load_turn("chat:other", "tg:5"))[0]
    assert found is not None and found.message.text == "x"


async def test_withdrawing_an_unanswered_turn_takes_back_its_message_only(
    store: Store, rows: Rows
) -> None:
    """The open turn's message goes; the answered ones and the reply stay, the round
    does not move, and the next message takes the next position."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0, turn_id="tg:1")])
    await store.create(consultation)
    await reply(store, consultation.id, "question?", expected=0, at=2.0)
    await store.add_message(
        consultation.id, Message(Role.USER, "poison", 3.0, turn_id="tg:2"), last_activity_at=3.0
    )
    assert await store.withdraw_turn(consultation.id, "tg:2")
    loaded = await store.load_active("chat:1")
    assert loaded is not None and [m.text for m in loaded.messages] == ["first", "question?"]
    assert (loaded.current_round, loaded.initial_request) == (1, consultation.initial_request)
    await store.add_message(
        consultation.id, Message(Role.USER, "next", 4.0, turn_id="tg:3"), last_activity_at=4.0
    )
    again = await store.load_active("chat:1")
    assert again is not None and [m.text for m in again.messages][-1] == "next"
    assert await rows("messages", consultation_id=consultation.id) == 3


async def test_an_answered_turn_or_an_unknown_one_is_not_withdrawn(store: Store) -> None:
    consultation = make(messages=[Message(Role.USER, "first", 1.0, turn_id="tg:1")])
    await store.create(consultation)
    await reply(store, consultation.id, "question?", expected=0, at=2.0)
    assert not await store.withdraw_turn(consultation.id, "tg:1")
    assert not await store.withdraw_turn(consultation.id, "tg:404")
    loaded = await store.get(consultation.id)
    assert loaded is not None and [m.text for m in loaded.messages] == ["first", "question?"]


async def test_withdrawing_the_only_message_removes_its_consultation(
    store: Store, rows: Rows
) -> None:
    """Nothing of a consultation its first message broke is left: the chat starts anew."""
    consultation = make(messages=[Message(Role.USER, "poison", 1.0, turn_id="tg:1")])
    await store.create(consultation)
    assert await store.withdraw_turn(consultation.id, "tg:1")
    assert await store.load_active("chat:1") is None
    assert await rows("consultations", id=consultation.id) == 0
    assert await rows("messages", consultation_id=consultation.id) == 0
    await store.create(make())  # the chat may open a new one


async def test_withdrawing_the_first_of_two_waiting_messages_makes_the_second_the_request(
    store: Store,
) -> None:
    consultation = dataclasses.replace(
        make(messages=[Message(Role.USER, "poison", 1.0, turn_id="tg:1")]),
        initial_request="poison",
    )
    await store.create(consultation)
    await store.add_message(
        consultation.id,
        Message(Role.USER, "real question", 2.0, turn_id="tg:2"),
        last_activity_at=2.0,
    )
    assert await store.withdraw_turn(consultation.id, "tg:1")
    loaded = await store.load_active("chat:1")
    assert loaded is not None and [m.text for m in loaded.messages] == ["real question"]
    assert loaded.initial_request == "real question"


async def test_load_turn_gives_the_turn_or_else_the_active_consultation(store: Store) -> None:
    """One read for a new turn: the consultation holding the turn id if there is one (then
    nothing else), else the chat's active consultation (or none)."""
    first = make("tg:load", at=1.0)
    first.messages[0].turn_id = "tg:1"
    await store.create(first)

    found, active = await store.load_turn("tg:load", "tg:1")
    assert found is not None and found.message.turn_id == "tg:1" and found.reply is None
    assert active is None

    found, active = await store.load_turn("tg:load", "tg:2")
    assert found is None
    assert active is not None and active.id == first.id
    assert [m.text for m in active.messages] == [m.text for m in first.messages]

    found, active = await store.load_turn("tg:load", None)
    assert found is None and active is not None and active.id == first.id

    assert await store.load_turn("tg:elsewhere", "tg:1") == (None, None)


async def test_loads_and_appends_made_together_each_get_their_own_answer(store: Store) -> None:
    """Many chats at once (the PostgreSQL store writes them in shared statements): each
    load sees its own chat, each append lands in its own consultation, and a reply whose
    round was already taken is refused on its own."""
    chats = [make(f"tg:many:{n}", at=float(n)) for n in range(30)]
    for consultation in chats:
        await store.create(consultation)

    loaded = await asyncio.gather(*(store.load_turn(c.chat_key, None) for c in chats))
    assert [active.id for _, active in loaded if active is not None] == [c.id for c in chats]

    async def reply(consultation: Consultation, expected: int) -> str:
        try:
            await store.record_reply(
                consultation.id,
                Message(Role.ASSISTANT, f"reply to {consultation.chat_key}", 50.0),
                expected_round=expected,
                current_round=expected + 1,
                status=Status.ACTIVE,
                last_activity_at=50.0,
            )
        except TurnSuperseded:
            return "superseded"
        return "stored"

    outcomes = await asyncio.gather(
        *(reply(c, 0 if n % 3 else 5) for n, c in enumerate(chats)),
        *(
            store.add_message(c.id, Message(Role.USER, "more", 60.0), last_activity_at=60.0)
            for c in chats[:10]
        ),
    )
    assert outcomes[:30] == ["superseded" if n % 3 == 0 else "stored" for n in range(30)]
    for n, consultation in enumerate(chats):
        after = await store.get(consultation.id)
        assert after is not None
        texts = [m.text for m in after.messages]
        assert texts.count(f"reply to {consultation.chat_key}") == (0 if n % 3 == 0 else 1)
        assert texts.count("more") == (1 if n < 10 else 0)
        assert after.current_round == (0 if n % 3 == 0 else 1)


async def test_an_idempotency_key_is_held_by_one_attempt_at_a_time(
    rows: Rows, store: Store
) -> None:
    """The first claim holds the key; another attempt gets nothing while the lease lives,
    takes it over once released or run out (keeping the session opened), never after a
    reply; a claim with no session is purged once old (by its first claim's time)."""
    key = ("client", "k1")

    async def claim(owner: str, at: float, fingerprint: str = "f") -> object:
        return await store.claim_idempotency_key(
            *key, fingerprint=fingerprint, owner=owner, at=at, lease_until=at + 30
        )

    held = await claim("a", 100.0)
    assert held is not None and held.session_id is None
    assert await claim("b", 110.0) is None
    assert await claim("b", 110.0, fingerprint="other") is None
    found = await store.find_idempotency_key(*key)
    assert found is not None and (found.fingerprint, found.lease_until) == ("f", 130.0)

    consultation = make("api:x")
    await store.create(consultation)
    assert not await store.attach_idempotency_session(*key, owner="b", session_id=consultation.id)
    assert await store.attach_idempotency_session(*key, owner="a", session_id=consultation.id)
    assert await store.renew_idempotency_key(*key, owner="a", lease_until=150.0)
    assert await claim("b", 140.0) is None  # the renewed lease still lives
    taken = await claim("b", 151.0)  # a died: its lease ran out
    assert taken is not None and taken.session_id == consultation.id
    assert not await store.renew_idempotency_key(*key, owner="a", lease_until=200.0)

    await store.release_idempotency_key(*key, owner="b")
    again = await claim("c", 152.0)  # released with its session: the session stays
    assert again is not None and again.session_id == consultation.id
    await store.save_idempotent_response(*key, '{"content": "done"}')
    assert await claim("d", 500.0) is None  # answered: never taken over
    found = await store.find_idempotency_key(*key)
    assert found is not None and (found.response, found.lease_until) == (
        '{"content": "done"}',
        None,
    )

    assert await claim("e", 10.0) is None  # the same key of the same client
    other = ("client", "k2")
    await store.claim_idempotency_key(*other, fingerprint="f", owner="e", at=10.0, lease_until=40.0)
    await store.release_idempotency_key(*other, owner="e")  # before any session: gone
    assert await store.find_idempotency_key(*other) is None
    await store.claim_idempotency_key(*other, fingerprint="f", owner="f", at=20.0, lease_until=50.0)
    await store.purge(older_than=60.0)  # its holder died before opening a session
    assert await store.find_idempotency_key(*other) is None
    assert await rows("idempotency_keys") == 1


async def test_forgetting_a_chat_deletes_all_it_kept_and_nothing_of_other_chats(
    rows: Rows, store: Store
) -> None:
    """Every consultation of the chat whatever its status, their messages and idempotency
    keys, and the chat's settings go in one call; another chat, and a key of INJECTION
    form, keep theirs."""
    done, active, other = make("tg:7", at=10.0), make("tg:7", at=20.0), make("tg:8")
    await store.create(done)
    await store.set_status(done.id, Status.COMPLETE, at=15.0)
    for consultation in (active, other):
        await store.create(consultation)
    await store.add_message(active.id, Message(Role.USER, "more", 21.0), last_activity_at=21.0)
    for chat in ("tg:7", "tg:8"):
        await store.save_chat_settings(chat, ChatSettings(max_rounds=4))
    key = ("client", "forget")
    await store.claim_idempotency_key(*key, fingerprint="f", owner="a", at=10.0, lease_until=40.0)
    assert await store.attach_idempotency_session(*key, owner="a", session_id=done.id)

    assert await store.forget_chat(INJECTION) == 0
    assert await store.forget_chat("tg:7") == 2

    assert await store.get(done.id) is None and await store.load_active("tg:7") is None
    assert await store.latest_status("tg:7") is None
    assert await store.load_chat_settings("tg:7") == ChatSettings()
    assert await store.find_idempotency_key(*key) is None
    assert await rows("messages") == 1  # the other chat's request
    assert await store.load_active("tg:8") is not None
    assert await store.load_chat_settings("tg:8") == ChatSettings(max_rounds=4)
    assert await store.forget_chat("tg:7") == 0


async def test_attaching_a_session_that_is_gone_raises_session_not_found(store: Store) -> None:
    """The key's session was purged meanwhile: `SessionNotFound`, and the claim stays as it
    was (no session), on every store."""
    key = ("client", "k3")
    held = await store.claim_idempotency_key(
        *key, fingerprint="f", owner="a", at=10.0, lease_until=40.0
    )
    assert held is not None
    with pytest.raises(SessionNotFound):
        await store.attach_idempotency_session(*key, owner="a", session_id="purged")
    found = await store.find_idempotency_key(*key)
    assert found is not None and (found.session_id, found.lease_until) == (None, 40.0)


async def test_a_nul_character_is_dropped_the_same_on_every_store(store: Store) -> None:
    """PostgreSQL cannot hold NUL in text (SQLite can): every store drops it from what it
    writes, so a text reads back the same wherever it was stored."""
    consultation = dataclasses.replace(
        make(
            "chat:nul",
            messages=[Message(Role.USER, "Hello\x00 there", 1000.0, author="A\x00nn")],
            system_prompt="Be\x00 brief",
        ),
        initial_request="Hello\x00 there",
    )
    await store.create(consultation)
    await store.add_message(
        consultation.id, Message(Role.USER, "More\x00", 1001.0), last_activity_at=1001.0
    )
    stored = await store.get(consultation.id)
    assert stored is not None
    assert [(m.text, m.author) for m in stored.messages] == [("Hello there", "Ann"), ("More", None)]
    assert (stored.system_prompt, stored.initial_request) == ("Be brief", "Hello there")


ROUND = ClarifyingRound(
    "Чтобы ответить, мне нужно знать:",
    (
        Question("Which workload?", ("Mostly reads", "Mostly writes")),
        Question("How large will it grow?"),
    ),
)


async def test_a_reply_with_questions_keeps_its_round_on_every_read(store: Store) -> None:
    """The round a reply asked comes back equal from get, load_active and load_turn (the
    turn's reply and the active consultation); messages that asked none load with None."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0, turn_id="tg:1")])
    await store.create(consultation)
    await store.record_reply(
        consultation.id,
        Message(Role.ASSISTANT, ROUND.text, 2.0, questions=ROUND),
        expected_round=0,
        current_round=1,
        status=Status.ACTIVE,
        last_activity_at=2.0,
    )
    await store.add_message(
        consultation.id, Message(Role.USER, "Mostly reads", 3.0), last_activity_at=3.0
    )
    await reply(store, consultation.id, "plain reply", expected=1, at=4.0)

    expected = [None, ROUND, None, None]
    for loaded in (await store.get(consultation.id), await store.load_active("chat:1")):
        assert loaded is not None
        assert [m.questions for m in loaded.messages] == expected
    found, _ = await store.load_turn("chat:1", "tg:1")
    assert found is not None and found.reply is not None and found.reply.questions == ROUND
    assert [m.questions for m in found.consultation.messages] == expected
    _, active = await store.load_turn("chat:1", None)
    assert active is not None and [m.questions for m in active.messages] == expected


async def test_a_consultation_created_with_a_round_and_picks_keeps_them(store: Store) -> None:
    """create stores the rounds of the messages it is given and the consultation's picks."""
    picks = Picks(1, (Answer(1, 2),))
    consultation = make(
        messages=[
            Message(Role.USER, "first", 1.0),
            Message(Role.ASSISTANT, ROUND.text, 2.0, questions=ROUND),
        ],
        current_round=1,
        picks=picks,
    )
    await store.create(consultation)
    assert await store.get(consultation.id) == consultation


async def test_replies_written_together_each_keep_their_own_round(store: Store) -> None:
    """Many chats replying at once (the PostgreSQL store writes them in shared statements):
    each reply keeps its own round, or None."""
    chats = [make(f"tg:rounds:{n}", at=float(n)) for n in range(12)]
    for consultation in chats:
        await store.create(consultation)

    def asked(n: int) -> ClarifyingRound | None:
        return None if n % 3 == 0 else ClarifyingRound(f"chat {n}", (Question(f"Q{n}?"),))

    await asyncio.gather(
        *(
            store.record_reply(
                c.id,
                Message(Role.ASSISTANT, f"reply {n}", 50.0, questions=asked(n)),
                expected_round=0,
                current_round=1,
                status=Status.ACTIVE,
                last_activity_at=50.0,
            )
            for n, c in enumerate(chats)
        )
    )
    loaded = await asyncio.gather(*(store.load_turn(c.chat_key, None) for c in chats))
    for n, (_, active) in enumerate(loaded):
        assert active is not None
        assert active.messages[-1].questions == asked(n)


async def test_picks_are_saved_replaced_cleared_and_loaded_with_the_consultation(
    store: Store,
) -> None:
    """Saved picks load with the consultation on every read; saving again replaces them,
    saving None clears them; a consultation never given picks loads with None."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0, turn_id="tg:1")])
    await store.create(consultation)
    loaded = await store.get(consultation.id)
    assert loaded is not None and loaded.picks is None

    first = Picks(1, (Answer(1, 2, by="Ann"), Answer(2, text="About 10 GB")))
    await store.save_picks(consultation.id, first)
    found, _ = await store.load_turn("chat:1", "tg:1")
    assert found is not None and found.consultation.picks == first
    for read in (await store.get(consultation.id), await store.load_active("chat:1")):
        assert read is not None and read.picks == first

    second = first.toggled(1, 1, by="Bob")
    await store.save_picks(consultation.id, second)
    _, active = await store.load_turn("chat:1", None)
    assert active is not None and active.picks == second

    await store.save_picks(consultation.id, None)
    cleared = await store.get(consultation.id)
    assert cleared is not None and cleared.picks is None


async def test_saving_picks_of_an_unknown_consultation_raises_session_not_found(
    store: Store, rows: Rows
) -> None:
    """An id no consultation has: `SessionNotFound`, and no other consultation changes."""
    other = make()
    await store.create(other)
    with pytest.raises(SessionNotFound):
        await store.save_picks(str(uuid.uuid4()), Picks(1, (Answer(1, 1),)))
    assert await store.get(other.id) == other
    assert await rows("consultations") == 1


@pytest.mark.parametrize(
    "damaged",
    [
        "{not json",
        "",
        '"a string"',
        "[1, 2, 3]",
        '{"round": "one", "answers": [[1]]}',
        '{"preamble": 5, "questions": 7}',
    ],
)
async def test_a_damaged_round_or_picks_reads_back_as_none(
    kind: StoreKind, database: str, store: Store, damaged: str
) -> None:
    """A stored round or picks value that is not one (malformed JSON, another shape) loads
    as None on every read; the rest of the consultation loads as it was."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0, turn_id="tg:1")])
    await store.create(consultation)
    await store.record_reply(
        consultation.id,
        Message(Role.ASSISTANT, ROUND.text, 2.0, questions=ROUND),
        expected_round=0,
        current_round=1,
        status=Status.ACTIVE,
        last_activity_at=2.0,
    )
    await store.save_picks(consultation.id, Picks(1, (Answer(1, 1),)))
    await kind.execute(
        database, "UPDATE messages SET questions = $1 WHERE role = 'assistant'", damaged
    )
    await kind.execute(database, "UPDATE consultations SET picks = $1", damaged)

    found, _ = await store.load_turn("chat:1", "tg:1")
    assert found is not None and found.reply is not None and found.reply.questions is None
    _, active = await store.load_turn("chat:1", None)
    for read in (
        await store.get(consultation.id),
        await store.load_active("chat:1"),
        found.consultation,
        active,
    ):
        assert read is not None and read.picks is None
        assert [(m.text, m.questions) for m in read.messages] == [
            ("first", None),
            (ROUND.text, None),
        ]


async def test_saving_picks_once_the_store_is_closed_raises_store_unavailable(
    kind: StoreKind, database: str
) -> None:
    """Like every write, save_picks on a closed store is `StoreUnavailable`, not a crash."""
    store = await kind.open(database)
    consultation = make()
    await store.create(consultation)
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.save_picks(consultation.id, Picks(0, (Answer(1, 1),)))


# -- client memory ------------------------------------------------------------------------


async def test_memory_owner_and_facts_of_a_consultation_round_trip(store: Store) -> None:
    """A consultation keeps whose memory it uses and the facts it started with."""
    consultation = make(memory_owner="tg:7@tg:-100", memory_facts=("Has two cats", "Лives"))
    await store.create(consultation)
    plain = make("chat:2")
    await store.create(plain)

    read = await store.get(consultation.id)
    assert read is not None
    assert (read.memory_owner, read.memory_facts) == ("tg:7@tg:-100", ("Has two cats", "Лives"))
    _, active = await store.load_turn("chat:1", None)
    assert active is not None and active.memory_facts == ("Has two cats", "Лives")
    other = await store.get(plain.id)
    assert other is not None and (other.memory_owner, other.memory_facts) == (None, ())


async def test_facts_are_deduplicated_capped_and_newest_kept(store: Store) -> None:
    """Facts equal ignoring case and spacing are kept once; past MAX_FACTS the oldest go."""
    added = await store.add_facts("tg:1", "tg:1", ["Lives in Riga", "lives  in riga"], at=1.0)
    assert [f.text for f in added] == ["Lives in Riga"]
    again = await store.add_facts("tg:1", "tg:1", ["LIVES IN RIGA", "Has a dog"], at=2.0)
    assert [f.text for f in again] == ["Has a dog"]

    await store.add_facts("tg:1", "tg:1", [f"fact {n}" for n in range(MAX_FACTS)], at=3.0)
    state = await store.load_memory("tg:1", "tg:1")
    assert len(state.facts) == MAX_FACTS
    assert [f.text for f in state.facts] == [f"fact {n}" for n in reversed(range(MAX_FACTS))]
    assert state.facts[0].id > state.facts[-1].id  # newest first


async def test_adding_ten_thousand_facts_stores_at_most_the_cap(store: Store, rows: Rows) -> None:
    """A hostile list of facts costs bounded work: at most MAX_FACTS are stored, each cut."""
    added = await store.add_facts(
        "api:x", "api:x", ["y" * 5000] + [f"f{n}" for n in range(10_000)], at=1.0
    )
    assert len(added) == MAX_FACTS
    assert await rows("memory_facts") == MAX_FACTS
    assert max(len(f.text) for f in added) == MAX_FACT_CHARS


async def test_facts_of_one_owner_never_show_for_another(store: Store) -> None:
    """Private and group owners of one person, and other people, see their own facts."""
    await store.add_facts("tg:1", "tg:1", ["private fact"], at=1.0)
    await store.add_facts("tg:1@tg:-5", "tg:1", ["group fact"], at=1.0)
    await store.add_facts("tg:2", "tg:2", ["someone else"], at=1.0)

    assert [f.text for f in (await store.load_memory("tg:1", "tg:1")).facts] == ["private fact"]
    group = await store.load_memory("tg:1@tg:-5", "tg:1")
    assert [f.text for f in group.facts] == ["group fact"]
    assert (await store.load_memory("tg:3", "tg:3")).facts == ()


async def test_a_fact_is_deleted_only_by_its_owner(store: Store) -> None:
    """A fact id of another owner, an unknown one or one out of range changes nothing."""
    (mine,) = await store.add_facts("tg:1", "tg:1", ["mine"], at=1.0)
    (theirs,) = await store.add_facts("tg:2", "tg:2", ["theirs"], at=1.0)

    assert not await store.delete_fact("tg:1", theirs.id)
    assert not await store.delete_fact("tg:1", 0)
    assert not await store.delete_fact("tg:1", -5)
    assert not await store.delete_fact("tg:1", 10**30)
    assert [f.text for f in (await store.load_memory("tg:2", "tg:2")).facts] == ["theirs"]
    assert await store.delete_fact("tg:1", mine.id)
    assert not await store.delete_fact("tg:1", mine.id)
    assert (await store.load_memory("tg:1", "tg:1")).facts == ()


async def test_memory_preferences_default_then_saved(store: Store) -> None:
    """A person without saved preferences has memory on and was not told yet."""
    assert (await store.load_memory("tg:1", "tg:1")).preferences == MemoryPreferences()
    await store.save_memory_preferences("tg:1", MemoryPreferences(enabled=False))
    await store.save_memory_preferences("tg:1", MemoryPreferences(False, notice_given=True))
    state = await store.load_memory("tg:1@tg:-5", "tg:1")
    assert state.preferences == MemoryPreferences(enabled=False, notice_given=True)


async def test_forget_memory_deletes_every_scope_of_the_person_only(
    store: Store, rows: Rows
) -> None:
    """Forgetting a person deletes their private and group facts and preferences, no one
    else's."""
    await store.add_facts("tg:1", "tg:1", ["a", "b"], at=1.0)
    await store.add_facts("tg:1@tg:-5", "tg:1", ["c"], at=1.0)
    await store.add_facts("tg:2", "tg:2", ["d"], at=1.0)
    await store.save_memory_preferences("tg:1", MemoryPreferences(notice_given=True))
    await store.save_memory_preferences("tg:2", MemoryPreferences(notice_given=True))

    assert await store.forget_memory("tg:1") == 3
    assert await rows("memory_facts") == 1
    assert await rows("memory_preferences", person="tg:2") == 1
    assert await rows("memory_preferences", person="tg:1") == 0
    assert await store.forget_memory("tg:1") == 0


async def test_interface_language_none_then_chosen_then_forgotten(store: Store, rows: Rows) -> None:
    """A person never asked has no language; the last choice is kept, per person, until
    their memory and preferences are forgotten."""
    assert await store.load_language("tg:1") is None
    await store.save_language("tg:1", "ru")
    await store.save_language("tg:1", "de")
    await store.save_language("tg:2", "fa")
    assert await store.load_language("tg:1") == "de"
    assert await store.load_language("tg:2") == "fa"
    assert await rows("person_languages", person="tg:1") == 1

    await store.forget_memory("tg:1")
    assert await store.load_language("tg:1") is None
    assert await store.load_language("tg:2") == "fa"


async def test_a_chosen_language_is_deleted_alone(store: Store, rows: Rows) -> None:
    """Clearing a choice deletes that person's row only (True when there was one) and
    leaves their other preferences."""
    await store.save_language("tg:1", "ru")
    await store.save_language("tg:2", "fa")
    await store.save_memory_preferences("tg:1", MemoryPreferences(enabled=False))
    assert await store.delete_language("tg:1")
    assert not await store.delete_language("tg:1")
    assert not await store.delete_language("tg:3")
    assert await store.load_language("tg:1") is None
    assert await store.load_language("tg:2") == "fa"
    assert await rows("memory_preferences", person="tg:1") == 1


async def test_concurrent_additions_for_one_owner_store_each_fact_once(
    kind: StoreKind, database: str, rows: Rows
) -> None:
    """Two workers adding the same facts at once store them once, within the cap."""
    first, second = await kind.open(database), await kind.open(database)
    try:
        batches = [[f"fact {n % 30}" for n in range(i, i + 10)] for i in range(0, 40, 5)]
        await asyncio.gather(
            *(
                (first if i % 2 else second).add_facts("tg:1", "tg:1", batch, at=float(i))
                for i, batch in enumerate(batches)
            )
        )
        facts = (await first.load_memory("tg:1", "tg:1")).facts
        assert len({f.text for f in facts}) == len(facts) == MAX_FACTS
        assert await rows("memory_facts") == MAX_FACTS
    finally:
        await first.close()
        await second.close()


# -- usage (`core.domain.usage`) -----------------------------------------------------------------


CHARGED = Usage(10, 20)


def charge(
    chat: str = "chat:1",
    *,
    day: str = "2026-11-26",
    person: str | None = "tg:7",
    client: str | None = None,
    model: str = "gpt-4o-mini",
    kind: CallKind = CallKind.ROUND,
    usage: Usage = CHARGED,
    cost: float = 0.5,
) -> Charge:
    return Charge(day, chat, model, kind, usage, cost, True, person, client)


async def totals(store: Store, scope: ScopeKind, key: str, since: str, until: str) -> list[Any]:
    found = await store.usage_of(scope, key, since_day=since, until_day=until)
    return [
        (t.model, t.prompt_tokens, t.completion_tokens, t.calls, t.estimated_calls, t.cost)
        for t in found
    ]


async def test_a_replys_charge_counts_for_its_person_chat_and_client_by_day(
    store: Store,
) -> None:
    """A charge stored with a reply is added to the person's, the chat's and the client
    key's daily totals; totals sum over the days asked for and group by model."""
    consultation = make("api:s1")
    await store.create(consultation)
    await store.record_reply(
        consultation.id,
        Message(Role.ASSISTANT, "Which load?", 1001.0, usage=Usage(10, 20)),
        expected_round=0,
        current_round=1,
        status=Status.ACTIVE,
        last_activity_at=1001.0,
        charge=charge("api:s1", person="api:u1", client="key-a"),
    )
    estimated = charge(
        "api:s1", day="2026-11-27", person="api:u1", client="key-a", usage=Usage(1, 2, True)
    )
    await store.add_usage(
        [estimated, dataclasses.replace(estimated, model="other", cost=0.0, priced=False)]
    )
    first_day = [("gpt-4o-mini", 10, 20, 1, 0, 0.5)]
    both_days = [("gpt-4o-mini", 11, 22, 2, 1, 1.0), ("other", 1, 2, 1, 1, 0.0)]
    for scope, key in [
        (ScopeKind.PERSON, "api:u1"),
        (ScopeKind.CHAT, "api:s1"),
        (ScopeKind.CLIENT, "key-a"),
    ]:
        assert await totals(store, scope, key, "2026-11-26", "2026-11-26") == first_day
        assert await totals(store, scope, key, "2026-11-01", "2026-11-30") == both_days
    assert await totals(store, ScopeKind.PERSON, "tg:7", "2026-11-01", "2026-11-30") == []
    assert await totals(store, ScopeKind.PERSON, "api:u1", "2026-12-01", "2026-12-31") == []


async def test_a_superseded_reply_or_follow_up_is_not_charged(store: Store) -> None:
    """The charge goes with the reply's compare-and-set: a reply not stored counts nothing,
    a follow-up stored counts once."""
    consultation = make()
    await store.create(consultation)
    await reply(store, consultation.id, "first", expected=0, at=1001.0)
    with pytest.raises(TurnSuperseded):
        await store.record_reply(
            consultation.id,
            Message(Role.ASSISTANT, "second", 1002.0),
            expected_round=0,
            current_round=1,
            status=Status.COMPLETE,
            last_activity_at=1002.0,
            charge=charge(),
        )
    assert await totals(store, ScopeKind.CHAT, "chat:1", "2026-11-26", "2026-11-26") == []
    done = await complete(store, "chat:2")
    answer = Message(Role.ASSISTANT, "Use PostgreSQL.", 1011.0)
    follow_up = charge("chat:2", kind=CallKind.FOLLOW_UP)
    await store.record_follow_up(
        done, answer, expected_follow_ups=0, last_activity_at=1011.0, charge=follow_up
    )
    with pytest.raises(TurnSuperseded):
        await store.record_follow_up(
            done, answer, expected_follow_ups=0, last_activity_at=1012.0, charge=follow_up
        )
    assert await totals(store, ScopeKind.PERSON, "tg:7", "2026-11-26", "2026-11-26") == [
        ("gpt-4o-mini", 10, 20, 1, 0, 0.5)
    ]


async def test_charges_of_many_replies_at_once_each_count(store: Store) -> None:
    """Replies of twenty chats by one person stored at once (one batch where the store
    batches) and charges added meanwhile: the person's total is their exact sum."""
    consultations = [make(f"chat:{n}") for n in range(20)]
    for consultation in consultations:
        await store.create(consultation)

    async def answer(consultation: Consultation) -> None:
        await store.record_reply(
            consultation.id,
            Message(Role.ASSISTANT, "Which load?", 1001.0),
            expected_round=0,
            current_round=1,
            status=Status.ACTIVE,
            last_activity_at=1001.0,
            charge=charge(consultation.chat_key),
        )

    await asyncio.gather(
        *map(answer, consultations), *(store.add_usage([charge(), charge()]) for _ in range(5))
    )
    assert await totals(store, ScopeKind.PERSON, "tg:7", "2026-11-26", "2026-11-26") == [
        ("gpt-4o-mini", 300, 600, 30, 0, 15.0)
    ]
    assert await totals(store, ScopeKind.CHAT, "chat:3", "2026-11-26", "2026-11-26") == [
        ("gpt-4o-mini", 10, 20, 1, 0, 0.5)
    ]


async def test_two_stores_storing_replies_for_one_person_count_every_charge(
    kind: StoreKind, database: str
) -> None:
    """Two workers storing replies of different chats by one person at once, each reply
    with its charge: the person's total is every reply's."""
    first, second = await kind.open(database), await kind.open(database)
    try:
        consultations = [make(f"chat:{n}") for n in range(16)]
        for consultation in consultations:
            await first.create(consultation)

        async def answer(store: Store, consultation: Consultation) -> None:
            await store.record_reply(
                consultation.id,
                Message(Role.ASSISTANT, "Which load?", 1001.0),
                expected_round=0,
                current_round=1,
                status=Status.ACTIVE,
                last_activity_at=1001.0,
                charge=charge(consultation.chat_key),
            )

        await asyncio.gather(
            *(answer((first, second)[n % 2], c) for n, c in enumerate(consultations))
        )
        assert await totals(second, ScopeKind.PERSON, "tg:7", "2026-11-26", "2026-11-26") == [
            ("gpt-4o-mini", 160, 320, 16, 0, 8.0)
        ]
    finally:
        await first.close()
        await second.close()


async def test_two_stores_on_one_database_adding_usage_lose_nothing(
    kind: StoreKind, database: str
) -> None:
    """Two workers charging one person at once: the totals are global and exact."""
    first, second = await kind.open(database), await kind.open(database)
    try:
        await asyncio.gather(
            *(s.add_usage([charge(), charge(chat="chat:2")]) for s in [first, second] * 20)
        )
        for s in (first, second):
            assert await totals(s, ScopeKind.PERSON, "tg:7", "2026-11-26", "2026-11-26") == [
                ("gpt-4o-mini", 800, 1600, 80, 0, 40.0)
            ]
    finally:
        await first.close()
        await second.close()


async def test_move_chat_carries_the_chats_usage_adding_to_the_new_keys(store: Store) -> None:
    """A group upgraded to a supergroup keeps what it spent: the old key's daily usage rows
    move to the new key, added to rows the new key already has for the same day, model and
    kind; the person's and client's rows are untouched."""
    await store.add_usage(
        [
            charge("tg:-7", day="2026-11-25"),
            charge("tg:-7", day="2026-11-26"),
            charge("tg:-1007", day="2026-11-26", usage=Usage(1, 2), cost=0.25),
        ]
    )
    await store.move_chat("tg:-7", "tg:-1007")
    assert await totals(store, ScopeKind.CHAT, "tg:-7", "2026-11-01", "2026-11-30") == []
    assert await totals(store, ScopeKind.CHAT, "tg:-1007", "2026-11-26", "2026-11-26") == [
        ("gpt-4o-mini", 11, 22, 2, 0, 0.75)
    ]
    assert await totals(store, ScopeKind.CHAT, "tg:-1007", "2026-11-25", "2026-11-25") == [
        ("gpt-4o-mini", 10, 20, 1, 0, 0.5)
    ]
    assert await totals(store, ScopeKind.PERSON, "tg:7", "2026-11-01", "2026-11-30") == [
        ("gpt-4o-mini", 21, 42, 3, 0, 1.25)
    ]
