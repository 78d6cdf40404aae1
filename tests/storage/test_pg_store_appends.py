"""Appending to one consultation from several processes' pools, and upgrading to the row's
own position counter: every message gets its own position, none is lost."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from core.domain.consultation import Consultation, Message, Role, Status
from core.domain.errors import TurnSuperseded
from storage.postgres import schema
from storage.postgres.sql import Append, append_messages
from storage.postgres.store import PostgresStore
from tests.postgres import postgres_url

__all__ = ["postgres_url"]


def consultation(key: str) -> Consultation:
    now = time.time()
    return Consultation(
        id=f"id-{key}",
        chat_key=key,
        max_rounds=100,
        initial_request="first",
        created_at=now,
        last_activity_at=now,
        messages=[Message(Role.USER, "first", now)],
    )


async def positions(url: str, consultation_id: str) -> list[int]:
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch(
            "SELECT seq FROM messages WHERE consultation_id = $1 ORDER BY seq", consultation_id
        )
    finally:
        await connection.close()
    return [row["seq"] for row in rows]


async def test_appends_from_two_pools_to_one_consultation_take_distinct_positions(
    postgres_url: str,
) -> None:
    first = await PostgresStore.open(postgres_url, pool_size=8)
    second = await PostgresStore.open(postgres_url, pool_size=8)
    try:
        target = consultation("tg:1")
        await first.create(target)

        async def append(store: PostgresStore, n: int) -> None:
            message = Message(Role.USER, f"message {n}", time.time())
            await store.add_message(target.id, message, last_activity_at=time.time())

        await asyncio.gather(*(append((first, second)[n % 2], n) for n in range(60)))

        assert await positions(postgres_url, target.id) == list(range(1, 62))
        loaded = await second.get(target.id)
        assert loaded is not None
        assert sorted(m.text for m in loaded.messages[1:]) == sorted(
            f"message {n}" for n in range(60)
        )
    finally:
        await first.close()
        await second.close()


async def test_two_pools_racing_to_record_one_round_store_one_reply(postgres_url: str) -> None:
    first = await PostgresStore.open(postgres_url, pool_size=4)
    second = await PostgresStore.open(postgres_url, pool_size=4)
    try:
        target = consultation("tg:2")
        await first.create(target)

        async def record(store: PostgresStore, text: str) -> str:
            try:
                await store.record_reply(
                    target.id,
                    Message(Role.ASSISTANT, text, time.time()),
                    expected_round=0,
                    current_round=1,
                    status=Status.ACTIVE,
                    last_activity_at=time.time(),
                )
            except TurnSuperseded:
                return "superseded"
            return "stored"

        outcomes = await asyncio.gather(record(first, "a"), record(second, "b"))

        assert sorted(outcomes) == ["stored", "superseded"]
        assert await positions(postgres_url, target.id) == [1, 2]
    finally:
        await first.close()
        await second.close()


async def test_messages_stored_before_the_upgrade_keep_their_positions(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = list(schema.MIGRATIONS)
    names = [name for name, _ in full]
    monkeypatch.setattr(schema, "MIGRATIONS", full[: names.index("m005_last_seq")])
    connection = await asyncpg.connect(postgres_url)
    try:
        await schema.migrate(connection)
        now = time.time()
        await connection.execute(
            "INSERT INTO consultations (id, chat_key, status, max_rounds, current_round,"
            " initial_request, options, created_at, last_activity_at)"
            " VALUES ('old', 'tg:3', 'active', 5, 1, 'q', '{}', $1, $1)",
            now,
        )
        for seq, role in enumerate(("user", "assistant", "user"), start=1):
            await connection.execute(
                "INSERT INTO messages (consultation_id, seq, role, text, created_at)"
                " VALUES ('old', $1, $2, $3, $4)",
                seq,
                role,
                f"{role} {seq}",
                now,
            )
    finally:
        await connection.close()
    monkeypatch.setattr(schema, "MIGRATIONS", full)

    store = await PostgresStore.open(postgres_url)  # applies the rest
    try:
        await store.record_reply(
            "old",
            Message(Role.ASSISTANT, "assistant 4", time.time()),
            expected_round=1,
            current_round=2,
            status=Status.ACTIVE,
            last_activity_at=time.time(),
        )
        loaded = await store.get("old")
    finally:
        await store.close()

    assert await positions(postgres_url, "old") == [1, 2, 3, 4]
    assert loaded is not None
    assert [m.text for m in loaded.messages] == ["user 1", "assistant 2", "user 3", "assistant 4"]


async def test_two_pools_appending_to_the_same_chats_in_opposite_orders_both_finish(
    postgres_url: str,
) -> None:
    """Each pool's appends go out in shared statements touching many consultations; two
    such statements over the same rows, made in opposite orders, lock the rows in one order
    and so never wait for each other in a circle: every append lands, positions distinct."""
    first = await PostgresStore.open(postgres_url, pool_size=4)
    second = await PostgresStore.open(postgres_url, pool_size=4)
    try:
        targets = [consultation(f"tg:many:{n}") for n in range(20)]
        for target in targets:
            await first.create(target)

        async def append_all(store: PostgresStore, order: list[Consultation], tag: str) -> None:
            await asyncio.gather(
                *(
                    store.add_message(
                        target.id,
                        Message(Role.USER, tag, time.time()),
                        last_activity_at=time.time(),
                    )
                    for target in order
                )
            )

        for attempt in range(5):
            await asyncio.wait_for(
                asyncio.gather(
                    append_all(first, targets, f"first {attempt}"),
                    append_all(second, targets[::-1], f"second {attempt}"),
                ),
                timeout=30,
            )
        for target in targets:
            assert await positions(postgres_url, target.id) == list(range(1, 12))
    finally:
        await first.close()
        await second.close()


async def test_one_batch_with_two_appends_to_one_consultation_stores_both_in_order(
    postgres_url: str,
) -> None:
    """However a batch is made up, two appends to one consultation both land, in order."""
    store = await PostgresStore.open(postgres_url, pool_size=2)
    try:
        target, other = consultation("tg:twice"), consultation("tg:other")
        await store.create(target)
        await store.create(other)
        connection = await asyncpg.connect(postgres_url)
        try:
            now = time.time()
            outcomes = await append_messages(
                connection,
                [
                    Append(target.id, Message(Role.USER, "one", now), now),
                    Append(other.id, Message(Role.USER, "elsewhere", now), now),
                    Append(target.id, Message(Role.USER, "two", now), now),
                ],
            )
        finally:
            await connection.close()
        assert [outcome.stored for outcome in outcomes] == [True, True, True]
        loaded = await store.get(target.id)
        assert loaded is not None
        assert [m.text for m in loaded.messages] == ["first", "one", "two"]
        assert await positions(postgres_url, target.id) == [1, 2, 3]
    finally:
        await store.close()
