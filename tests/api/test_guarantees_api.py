"""Guarantees of the HTTP API that only show at shutdown, end to end (real aiohttp server,
real openai SDK against the fake model server, real SQLite)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

from core.domain.asking import UserMessage
from fakes.model_server import FakeModelServer
from tests.api_harness import api_settings, running_api


def only_consultation_id(db_path: Path) -> str:
    with sqlite3.connect(db_path) as db:
        [(consultation_id,)] = db.execute("SELECT id FROM consultations").fetchall()
    return str(consultation_id)


async def test_shutdown_waits_for_a_round_being_answered(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """A client hung up while its round was being answered, then the server stops: the
    shutdown waits for that round, and its reply is stored before the store is closed.

    The reply is slow (it takes over a second to stream), so a shutdown that did not wait
    would be over long before the reply could be stored.
    """
    db_path = tmp_path / "api.sqlite3"
    model_server.enqueue("Worth the wait", delay=0.5, chunk_size=4, chunk_delay=0.2)
    async with running_api(api_settings(db_path, model_server.base_url)) as api:
        request = asyncio.create_task(api.client.post("/api/chat", json={"message": "Slow one"}))
        await model_server.wait_requests(1)
        request.cancel()  # the client hangs up
        with contextlib.suppress(asyncio.CancelledError):
            await request
        await api.client.server.close()  # what stopping the process does
        consultation = await api.store.get(only_consultation_id(db_path))
        assert consultation is not None
        assert [m.text for m in consultation.messages] == ["Slow one", "Worth the wait"]
        assert consultation.current_round == 1


async def test_a_telegram_consultation_is_not_an_api_session(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """A Telegram chat's consultation id is an unknown session (404) to the API: it can be
    neither continued (either chat endpoint) nor read back, and it gets no message."""
    db_path = tmp_path / "api.sqlite3"
    async with running_api(api_settings(db_path, model_server.base_url)) as api:
        chat = await api.engine.turns.ask(UserMessage("tg:42", "Private matter"))
        for path in ("/api/chat", "/api/chat/stream"):
            body = {"sessionId": chat.consultation_id, "message": "let me in"}
            response = await api.client.post(path, json=body)
            assert response.status == 404, await response.text()
            assert (await response.json())["code"] == "SESSION_NOT_FOUND"
        read = await api.client.get(f"/api/sessions/{chat.consultation_id}")
        assert read.status == 404, await read.text()  # nor can it be read back
        after = await api.store.get(chat.consultation_id)
        assert after is not None and after.current_round == 1
        assert [m.text for m in after.messages] == ["Private matter", "Reply to: Private matter"]
    assert len(model_server.requests) == 1
