"""`core.turns.lifecycle.Lifecycle.reset` and `status` while a turn is running (real SQLite,
the real openai SDK, the fake model server): reset stops the turn's model call instead of waiting
behind it, the stopped turn stores no reply, and other chats are left alone."""

from __future__ import annotations

import asyncio

import pytest

from core.domain.asking import UserMessage
from core.domain.consultation import Role, Status
from core.domain.errors import TurnCancelled
from core.domain.outcomes import Reply
from core.turns.engine import Engine
from fakes.model_server import FakeModelServer
from storage.sqlite.store import SqliteStore

GUARD = 20  # seconds; only a broken reset ever gets near it


async def streaming_turn(
    service: Engine, model_server: FakeModelServer, key: str, text: str
) -> asyncio.Task[Reply]:
    """Start `ask` on a model that streams forever; return once its text is arriving."""
    model_server.enqueue("abc", endless=True, chunk_size=4, chunk_delay=0.01)
    streaming = asyncio.Event()

    async def on_text(shown: str) -> None:
        streaming.set()

    task = asyncio.create_task(service.turns.ask(UserMessage(key, text, on_text=on_text)))
    await streaming.wait()
    return task


async def test_reset_stops_the_running_turn_and_stores_no_reply(
    service: Engine, store: SqliteStore, model_server: FakeModelServer
) -> None:
    async with asyncio.timeout(GUARD):
        turn = await streaming_turn(service, model_server, "tg:1", "Plan my week")
        running = await service.turns.status("tg:1")
        assert running.active and running.answering
        stuck = await store.load_active("tg:1")
        assert stuck is not None

        assert await service.lifecycle.reset("tg:1") is True
        with pytest.raises(TurnCancelled):
            await turn

    idle = await service.turns.status("tg:1")
    assert not idle.active and not idle.answering
    ended = await store.get(stuck.id)
    assert ended is not None and ended.status is Status.RESET
    assert [(m.role, m.text) for m in ended.messages] == [(Role.USER, "Plan my week")]
    reply = await service.turns.ask(UserMessage("tg:1", "New topic"))
    assert reply.round == 1
    consultation = await store.load_active("tg:1")
    assert consultation is not None
    assert [(m.role, m.text) for m in consultation.messages] == [
        (Role.USER, "New topic"),
        (Role.ASSISTANT, "Reply to: New topic"),
    ]


async def test_reset_of_another_chat_leaves_the_turn_running(
    service: Engine, model_server: FakeModelServer
) -> None:
    async with asyncio.timeout(GUARD):
        turn = await streaming_turn(service, model_server, "tg:1", "Plan my week")
        assert await service.lifecycle.reset("tg:2") is False
        assert not turn.done()
        assert (await service.turns.status("tg:1")).answering
        assert await service.lifecycle.reset("tg:1") is True
        with pytest.raises(TurnCancelled):
            await turn


async def test_a_turn_queued_behind_a_reset_runs_after_it(
    service: Engine, model_server: FakeModelServer
) -> None:
    """A message waiting for the chat when /reset came starts the next consultation."""
    async with asyncio.timeout(GUARD):
        turn = await streaming_turn(service, model_server, "tg:1", "Plan my week")
        reset = asyncio.create_task(service.lifecycle.reset("tg:1"))  # tasks start in this order
        follow_up = asyncio.create_task(service.turns.ask(UserMessage("tg:1", "Something else")))
        assert await reset is True
        with pytest.raises(TurnCancelled):
            await turn
        reply = await follow_up
    assert reply.round == 1
    assert model_server.requests[-1]["messages"][-1]["content"] == "Something else"
