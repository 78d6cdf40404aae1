"""Two workers on one store: two `Engine`s sharing one real SQLite store, each
with its own `KeyedLock`, so their per-chat locks do not see each other (as with two
processes). The model is the fake model server behind the real openai SDK.

The store decides the races: a second ACTIVE consultation for a chat is refused (the
service then joins the one that won), and a reply planned from a round another writer
already answered is refused (the slower turn raises `TurnSuperseded`, storing nothing)."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from core.domain.asking import UserMessage
from core.domain.consultation import Consultation, Role
from core.domain.errors import TurnSuperseded
from core.domain.outcomes import Notice
from core.domain.ports import ConsultationStore
from core.llm.llm import OpenAICompleter
from core.turns.engine import Engine
from fakes.model_server import FakeModelServer
from storage.sqlite.store import SqliteStore
from tests.service_harness import make_service

KEY = "tg:77"
GUARD = 20  # seconds; only a broken service ever waits this long


class PausingStore:
    """The real store, except that `create` announces it was reached and then waits to be
    released: the worker has seen no active consultation and is about to create one."""

    def __init__(self, inner: SqliteStore) -> None:
        self._inner = inner
        self.reached_create = asyncio.Event()
        self.release_create = asyncio.Event()

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def create(
        self, consultation: Consultation, *, starter: str | None = None, start_limit: int = 0
    ) -> None:
        self.reached_create.set()
        await asyncio.wait_for(self.release_create.wait(), GUARD)
        await self._inner.create(consultation, starter=starter, start_limit=start_limit)


def worker(store: ConsultationStore, completer: OpenAICompleter) -> Engine:
    """One worker: its own in-process locks, the shared store and model."""
    return make_service(store, completer)


async def history(store: SqliteStore) -> list[tuple[Role, str]]:
    consultation = await store.load_active(KEY)
    assert consultation is not None
    return [(m.role, m.text) for m in consultation.messages]


async def test_two_workers_starting_one_chat_share_one_consultation(
    store: SqliteStore, completer: OpenAICompleter
) -> None:
    """Worker B saw no consultation and is about to create one when worker A creates and
    answers it. B's create is refused; B adds its user's message to A's consultation and
    answers it as the next round, with no STARTED notice and no error."""
    pausing = PausingStore(store)
    first = worker(store, completer)
    second = worker(cast(ConsultationStore, pausing), completer)

    late = asyncio.create_task(second.turns.ask(UserMessage(KEY, "Second user here", author="Bob")))
    await asyncio.wait_for(pausing.reached_create.wait(), GUARD)
    early = await first.turns.ask(UserMessage(KEY, "First user here", author="Ann"))
    pausing.release_create.set()
    joined = await asyncio.wait_for(late, GUARD)

    assert (early.round, Notice.STARTED in early.notices) == (1, True)
    assert (joined.round, Notice.STARTED in joined.notices) == (2, False)
    assert joined.consultation_id == early.consultation_id
    assert await history(store) == [
        (Role.USER, "First user here"),
        (Role.ASSISTANT, "Reply to: First user here"),
        (Role.USER, "Second user here"),
        (Role.ASSISTANT, "Reply to: Second user here"),
    ]


async def test_a_resend_that_lost_the_start_race_is_not_stored_twice(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer
) -> None:
    """The same message reaching both workers (a redelivery): the one that lost the race
    to create finds it already as the open turn and does not store it again."""
    pausing = PausingStore(store)
    first = worker(store, completer)
    second = worker(cast(ConsultationStore, pausing), completer)
    answer = asyncio.Event()
    model_server.enqueue("Which city?", hold=answer)

    late = asyncio.create_task(second.turns.ask(UserMessage(KEY, "Book a table", author="Ann")))
    await asyncio.wait_for(pausing.reached_create.wait(), GUARD)
    early = asyncio.create_task(first.turns.ask(UserMessage(KEY, "Book a table", author="Ann")))
    await model_server.wait_requests(1)  # A created the consultation and asked the model
    pausing.release_create.set()
    await model_server.wait_requests(2)  # B joined it and asked about the same open turn
    joined = await asyncio.wait_for(late, GUARD)  # B's model answered at once: B won
    answer.set()
    with pytest.raises(TurnSuperseded):
        await asyncio.wait_for(early, GUARD)

    assert (joined.round, joined.text) == (1, "Reply to: Book a table")
    assert [m["content"] for m in model_server.requests[1]["messages"][1:]] == ["Book a table"]
    assert await history(store) == [
        (Role.USER, "Book a table"),
        (Role.ASSISTANT, "Reply to: Book a table"),
    ]


async def test_the_slower_of_two_turns_on_one_round_is_superseded_and_stores_nothing(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer
) -> None:
    """Two workers answer the same round at once: the one whose reply is recorded first
    wins; the other raises TurnSuperseded and its reply is not stored."""
    first, second = worker(store, completer), worker(store, completer)
    await first.turns.ask(UserMessage(KEY, "Plan my week"))
    slow = asyncio.Event()
    model_server.enqueue("slow reply", hold=slow)
    model_server.enqueue("fast reply")

    slower = asyncio.create_task(first.turns.ask(UserMessage(KEY, "Mostly meetings")))
    await model_server.wait_requests(2)  # A stored its message and is waiting for the model
    faster = await second.turns.ask(UserMessage(KEY, "And some gym"))
    slow.set()
    with pytest.raises(TurnSuperseded):
        await asyncio.wait_for(slower, GUARD)

    assert faster.round == 2
    assert await history(store) == [
        (Role.USER, "Plan my week"),
        (Role.ASSISTANT, "Reply to: Plan my week"),
        (Role.USER, "Mostly meetings"),
        (Role.USER, "And some gym"),
        (Role.ASSISTANT, "fast reply"),
    ]
    consultation = await store.load_active(KEY)
    assert consultation is not None and consultation.current_round == 2
