"""A round another worker answered first: the HTTP API answers 409 CONFLICT naming the
session (nothing of the losing round's reply was stored). A real server over the
production runtime, real SQLite, the real openai SDK against the fake model server; the
other worker is a second `Engine` on the same store with its own locks."""

from __future__ import annotations

import asyncio
import logging

import pytest

from core.llm.llm import OpenAICompleter
from core.primitives.keyed_lock import KeyedLock
from core.prompting.prompts import PromptLibrary
from core.prompting.requests import EngineConfig
from core.turns.engine import build_engine
from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi


async def test_a_round_answered_by_another_worker_is_409_conflict(
    api: RunningApi, model_server: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    """While this server waits for the model, another worker answers the same round: the
    request ends 409 CONFLICT with the session id, and only the other worker's reply is
    stored. Losing that race is no error of the server: nothing is logged as one."""
    response = await api.client.post("/api/chat", json={"message": "Plan a trip", "maxRounds": 3})
    session_id = (await response.json())["sessionId"]
    held = asyncio.Event()
    model_server.enqueue("this reply loses", hold=held)
    request = asyncio.create_task(
        api.client.post("/api/chat", json={"message": "To Rome", "sessionId": session_id})
    )
    await model_server.wait_requests(2)
    other = OpenAICompleter(
        api_key="test", base_url=model_server.base_url, timeout=10, max_retries=0
    )
    try:
        worker = build_engine(
            api.store, other, PromptLibrary(), EngineConfig(model="m"), locks=KeyedLock()
        )
        won = await worker.sessions.continue_session(session_id, "In May")
    finally:
        await other.close()
    held.set()
    response = await request

    assert response.status == 409
    body = await response.json()
    assert (body["code"], body["sessionId"]) == ("CONFLICT", session_id)
    stored = await api.engine.sessions.get_session(session_id)
    assert stored.current_round == won.round == 2
    assert "this reply loses" not in [m.text for m in stored.messages]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
