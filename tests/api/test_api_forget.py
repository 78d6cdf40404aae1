"""`DELETE /api/sessions/{id}` over a real server, the fake model and real SQLite: a session
and all kept with it go, a round being answered stores nothing after it, and no id a
stranger sends reaches anything but an API session."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from core.domain.consultation import Consultation, Message, Role
from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi


async def post(api: RunningApi, body: Any, key: str | None = None) -> Any:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    response = await api.client.post("/api/chat", data=json.dumps(body).encode(), headers=headers)
    assert response.status == 200, await response.text()
    return await response.json()


async def code_of(response: Any) -> tuple[int, str]:
    return response.status, (await response.json())["code"]


async def test_a_deleted_session_is_gone_with_its_messages_and_idempotency_keys(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    first = await post(api, {"message": "Help me plan a garden", "maxRounds": 3}, key="garden-1")
    session = first["sessionId"]
    await post(api, {"message": "Tomatoes", "sessionId": session})
    assert await api.store.find_idempotency_key("addr:127.0.0.1", "garden-1") is not None

    response = await api.client.delete(f"/api/sessions/{session}")
    assert response.status == 204

    assert await code_of(await api.client.get(f"/api/sessions/{session}")) == (
        404,
        "SESSION_NOT_FOUND",
    )
    assert await api.store.get(session) is None
    assert await api.store.find_idempotency_key("addr:127.0.0.1", "garden-1") is None
    # The same key now starts anew instead of replaying the forgotten reply.
    requests = len(model_server.requests)
    again = await post(api, {"message": "Help me plan a garden", "maxRounds": 3}, key="garden-1")
    assert again["sessionId"] != session and len(model_server.requests) == requests + 1
    assert await code_of(await api.client.delete(f"/api/sessions/{session}")) == (
        404,
        "SESSION_NOT_FOUND",
    )


async def test_ids_that_name_no_api_session_delete_nothing(api: RunningApi) -> None:
    """A chat's consultation is never reached by its id, nor is anything by a malformed one."""
    chat = Consultation(
        id=str(uuid.uuid4()),
        chat_key="tg:42",
        max_rounds=3,
        initial_request="private",
        created_at=time.time(),
        last_activity_at=time.time(),
        messages=[Message(Role.USER, "private", time.time())],
    )
    await api.store.create(chat)
    for forged in (chat.id, str(uuid.uuid4()), "not-a-uuid", "%00", "x" * 5000, "..%2F..%2Fx"):
        response = await api.client.delete(f"/api/sessions/{forged}")
        assert await code_of(response) == (404, "SESSION_NOT_FOUND"), forged
    assert await api.store.get(chat.id) is not None


async def test_deleting_a_session_mid_round_stops_it_and_stores_nothing_after(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    first = await post(api, {"message": "Help me plan a garden", "maxRounds": 3})
    session = first["sessionId"]
    release = asyncio.Event()
    model_server.enqueue("Which soil do you have?", hold=release)
    body = json.dumps({"message": "Tomatoes", "sessionId": session}).encode()
    running = asyncio.ensure_future(
        api.client.post("/api/chat", data=body, headers={"Content-Type": "application/json"})
    )
    await model_server.wait_requests(2)

    assert (await api.client.delete(f"/api/sessions/{session}")).status == 204
    release.set()
    answered = await running
    assert answered.status != 200
    assert await api.store.get(session) is None
