"""Retrying an API request is safe: `Idempotency-Key` returns the stored reply, never a new round.

Everything real: the aiohttp app on 127.0.0.1, SQLite, the openai SDK against the fake model.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from typing import Any

import aiohttp
import pytest
from aiohttp import ClientResponse
from openai._streaming import ServerSentEvent, SSEDecoder

from api import key_claims
from core.domain.consultation import Role
from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi

KEY = "3f2c9a6e-5b1d-4c1e-9f7a-0d4b8e2a6c11"


async def post(
    api: RunningApi, body: Any, *, key: str | None = KEY, path: str = "/api/chat"
) -> ClientResponse:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return await api.client.post(path, data=json.dumps(body).encode(), headers=headers)


async def chat(api: RunningApi, body: Any, *, key: str | None = KEY) -> tuple[int, Any]:
    response = await post(api, body, key=key)
    return response.status, await response.json()


async def events_of(response: ClientResponse) -> list[ServerSentEvent]:
    return [event async for event in SSEDecoder().aiter_bytes(response.content.iter_any())]


async def user_messages(api: RunningApi, session: str) -> list[str]:
    stored = await api.store.get(session)
    assert stored is not None
    return [m.text for m in stored.messages if m.role is Role.USER]


async def test_a_resent_request_gets_the_stored_reply_without_a_new_round(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The same key and body twice: one model call, one stored message, the same JSON body."""
    model_server.enqueue("Which exercises?")
    body = {"message": "Help with weights", "maxRounds": 3}
    first = await post(api, body)
    assert first.status == 200 and "Idempotent-Replayed" not in first.headers
    answer = await first.json()
    again = await post(api, body)
    assert again.status == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert await again.json() == answer
    assert len(model_server.requests) == 1
    assert await user_messages(api, answer["sessionId"]) == ["Help with weights"]

    continuing = {"message": "Curls", "sessionId": answer["sessionId"]}
    status, second = await chat(api, continuing, key="second-key")
    assert (status, second["round"]) == (200, 2)
    assert await chat(api, continuing, key="second-key") == (200, second)
    stored = await api.store.get(answer["sessionId"])
    assert stored is not None and stored.current_round == 2
    assert len(model_server.requests) == 2


async def test_a_retry_after_the_final_answer_gets_that_answer(api: RunningApi) -> None:
    """A client that missed the final reply gets it again, not DIALOG_COMPLETED."""
    status, answer = await chat(api, {"message": "What is 2+2?"})
    assert (status, answer["isComplete"]) == (200, True)
    assert await chat(api, {"message": "What is 2+2?"}) == (200, answer)


async def test_the_same_key_with_another_body_is_refused(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Reusing a key for a different request is a 422 with its own code; nothing is stored."""
    status, answer = await chat(api, {"message": "First question", "maxRounds": 2})
    assert status == 200
    for other in (
        {"message": "Another question", "maxRounds": 2},
        {"message": "First question", "maxRounds": 3},
        {"message": "First question", "maxRounds": 2, "sessionId": answer["sessionId"]},
    ):
        status, error = await chat(api, other)
        assert (status, error["code"]) == (422, "IDEMPOTENCY_KEY_REUSED")
    assert len(model_server.requests) == 1
    assert await user_messages(api, answer["sessionId"]) == ["First question"]
    # The same request written differently (key order, spacing) is still the same request.
    raw = b'{ "maxRounds": 2,  "message": "First question" }'
    response = await api.client.post(
        "/api/chat", data=raw, headers={"Idempotency-Key": KEY, "Content-Type": "application/json"}
    )
    assert (response.status, await response.json()) == (200, answer)


async def test_a_failed_first_attempt_leaves_the_key_usable(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A model error is not stored: the retry really retries, on the same session."""
    model_server.enqueue(status=500)
    body = {"message": "Plan my week", "maxRounds": 2}
    status, error = await chat(api, body)
    assert (status, error["code"]) == (503, "MODEL_UNAVAILABLE")
    model_server.enqueue("Which days are free?")
    status, answer = await chat(api, body)
    assert (status, answer["round"], answer["sessionId"]) == (200, 1, error["sessionId"])
    assert await user_messages(api, answer["sessionId"]) == ["Plan my week"]
    assert await chat(api, body) == (200, answer)
    assert len(model_server.requests) == 2


async def test_a_retry_while_the_first_is_running_waits_for_its_result(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Two sends of one key at once: one model call, both get the same reply."""
    release = asyncio.Event()
    model_server.enqueue("Slow answer", hold=release)
    body = {"message": "Question", "maxRounds": 2}
    first = asyncio.create_task(chat(api, body))
    await model_server.wait_requests(1)
    second = asyncio.create_task(chat(api, body))
    stream = asyncio.create_task(post(api, body, path="/api/chat/stream"))
    await api.arrivals.wait(3)  # both retries reached the server while the first is held
    release.set()
    (status, answer), again = await asyncio.gather(first, second)
    assert status == 200 and again == (200, answer)
    events = await events_of(await stream)
    assert [e.event for e in events] == ["session", "done"]
    assert events[0].json() == {"sessionId": answer["sessionId"]}
    assert events[1].json() == answer
    assert len(model_server.requests) == 1
    assert await user_messages(api, answer["sessionId"]) == ["Question"]


async def test_a_resent_stream_gets_its_session_and_done_events(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The stream names its session first; a resend replays `session` and `done` only."""
    model_server.enqueue("A long streamed answer", chunk_size=4)
    body = {"message": "Stream it", "maxRounds": 2}
    events = await events_of(await post(api, body, path="/api/chat/stream"))
    assert events[0].event == "session" and events[-1].event == "done"
    done = events[-1].json()
    assert events[0].json() == {"sessionId": done["sessionId"]}
    again = await events_of(await post(api, body, path="/api/chat/stream"))
    assert [(e.event, e.json()) for e in again] == [
        ("session", {"sessionId": done["sessionId"]}), ("done", done)]  # fmt: skip
    assert await chat(api, body) == (200, done)  # the key is shared by both endpoints
    assert len(model_server.requests) == 1


@pytest.mark.parametrize("key", ["", "x" * 256, "bad\tkey"])
async def test_a_malformed_key_is_a_validation_error(
    api: RunningApi, model_server: FakeModelServer, key: str
) -> None:
    """Keys are 1-255 visible ASCII characters; anything else is refused before the model."""
    status, error = await chat(api, {"message": "Hi"}, key=key)
    assert (status, error["code"]) == (400, "VALIDATION_ERROR")
    assert "Idempotency-Key" in error["error"]
    assert model_server.requests == []


async def test_keys_are_deleted_with_their_session(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Once the retention purge deleted the session, its key starts a new request."""
    status, answer = await chat(api, {"message": "Short one"})
    assert status == 200
    _, purged = await api.engine.lifecycle.cleanup(retention_seconds=1, now=time.time() + 10)
    assert purged == 1 and await api.store.get(answer["sessionId"]) is None
    status, again = await chat(api, {"message": "Short one"})
    assert status == 200 and again["sessionId"] != answer["sessionId"]
    assert len(model_server.requests) == 2


async def test_session_can_be_read_back(api: RunningApi, model_server: FakeModelServer) -> None:
    """GET /api/sessions/{id}: status, round, limit and the messages with role, text, time."""
    model_server.enqueue("Which exercises?")
    started = time.time()
    _, answer = await chat(api, {"message": "Help", "maxRounds": 2}, key=None)
    response = await api.client.get(f"/api/sessions/{answer['sessionId']}")
    assert response.status == 200
    view = await response.json()
    assert {k: v for k, v in view.items() if k != "messages"} == {
        "sessionId": answer["sessionId"], "status": "active", "round": 1, "maxRounds": 2,
        "isComplete": False}  # fmt: skip
    assert [(m["role"], m["text"]) for m in view["messages"]] == [
        ("user", "Help"), ("assistant", "Which exercises?")]  # fmt: skip
    for message in view["messages"]:
        assert started - 1 <= _epoch(message["time"]) <= time.time() + 1
    missing = await api.client.get("/api/sessions/0b8f5a4e-8d6b-4c2e-9a51-1f0e3c7d2b9a")
    assert (missing.status, (await missing.json())["code"]) == (404, "SESSION_NOT_FOUND")
    malformed = await api.client.get("/api/sessions/not-a-uuid")
    assert (malformed.status, (await malformed.json())["code"]) == (404, "SESSION_NOT_FOUND")


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text).timestamp()


@pytest.mark.parametrize("max_rounds", [1, 3])
async def test_a_reply_stored_without_its_key_record_is_still_replayed(
    api: RunningApi, model_server: FakeModelServer, max_rounds: int
) -> None:
    """The process died between storing the round and storing the key's reply: the retry
    finds the answered round in the session and returns it, instead of a new round (or
    DIALOG_COMPLETED after a final answer)."""
    model_server.enqueue("The answer")
    body = {"message": "Question", "maxRounds": max_rounds}
    status, answer = await chat(api, body)
    assert status == 200
    with sqlite3.connect(api.settings.db_path) as db:  # what the crash leaves behind
        db.execute("UPDATE idempotency_keys SET response = NULL")
    assert await chat(api, body) == (200, answer)
    assert len(model_server.requests) == 1
    assert await user_messages(api, answer["sessionId"]) == ["Question"]


async def test_keys_belong_to_their_client(api: RunningApi, model_server: FakeModelServer) -> None:
    """Without a token a client is its address: the same key from another one is its own."""
    body = {"message": "Same words, two clients"}
    status, mine = await chat(api, body)
    assert status == 200
    connector = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
    async with aiohttp.ClientSession(connector=connector) as other:
        url = api.client.make_url("/api/chat")
        async with other.post(url, json=body, headers={"Idempotency-Key": KEY}) as response:
            assert response.status == 200 and "Idempotent-Replayed" not in response.headers
            theirs = await response.json()
    assert theirs["sessionId"] != mine["sessionId"]
    assert len(model_server.requests) == 2


async def test_a_retried_message_equal_to_an_earlier_one_gets_a_new_round(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A key whose first attempt failed is retried; the session already holds the same
    words answered in an earlier round (under another key). That older reply is not this
    key's: the retry answers a new round."""
    _, opened = await chat(api, {"message": "Start", "maxRounds": 5}, key="k0")
    session = opened["sessionId"]
    yes = {"message": "Yes", "sessionId": session}
    model_server.enqueue("First yes")
    assert (await chat(api, yes, key="k1"))[1]["content"] == "First yes"
    model_server.enqueue(status=500)
    status, error = await chat(api, yes, key="k2")
    assert (status, error["code"]) == (503, "MODEL_UNAVAILABLE")
    model_server.enqueue("Second yes")
    status, answer = await chat(api, yes, key="k2")
    assert (status, answer["content"], answer["round"]) == (200, "Second yes", 3)


async def test_a_key_whose_holder_died_is_taken_over_once_its_lease_ran_out(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A worker died while answering (its claim still names it, the reply was stored in the
    session but not under the key): the retry waits for the lease to run out, then takes the
    key over and replays the answered round, without a new one."""
    model_server.enqueue("The answer")
    body = {"message": "Question", "maxRounds": 3}
    status, answer = await chat(api, body)
    assert status == 200
    with sqlite3.connect(api.settings.db_path) as db:
        db.execute(
            "UPDATE idempotency_keys SET response = NULL, owner = 'dead', lease_until = ?",
            (time.time() + 0.5,),
        )
    assert await chat(api, body) == (200, answer)
    assert len(model_server.requests) == 1


async def test_a_client_that_hangs_up_leaves_the_round_to_its_retry(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The server cancels the handler of a client that hung up (the test server does, as
    aiohttp's `handler_cancellation` option would), but the round it started goes on: a
    retry with the same key joins it and gets its reply."""
    release = asyncio.Event()
    model_server.enqueue("Slow answer", hold=release)
    body = {"message": "Question", "maxRounds": 2}
    first = asyncio.create_task(chat(api, body))
    await model_server.wait_requests(1)
    first.cancel()  # the client hangs up: its connection closes
    runner = api.client.server.runner
    assert runner is not None and runner.server is not None
    for _ in range(1000):  # until the server saw it go (and cancelled its handler)
        if not runner.server.connections:
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the server never saw the client hang up")
    second = asyncio.create_task(chat(api, body))
    await api.arrivals.wait(2)
    release.set()
    status, answer = await second
    assert (status, answer["content"]) == (200, "Slow answer")
    assert len(model_server.requests) == 1


async def test_a_retry_replays_the_round_its_own_message_was_answered_in(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A key's first attempt stored its message and failed; the next request's round
    answered both messages, and a later round answered the same words again under a
    third key. The retry is found by its own stored message, so it gets the round that
    answered it (2), not the later one with equal words, and no new round."""
    _, opened = await chat(api, {"message": "Start", "maxRounds": 5}, key="k0")
    session = opened["sessionId"]
    yes = {"message": "Yes", "sessionId": session}
    model_server.enqueue(status=500)
    status, error = await chat(api, yes, key="k1")
    assert (status, error["code"]) == (503, "MODEL_UNAVAILABLE")
    model_server.enqueue("Yes and no, noted")
    status, both = await chat(api, {"message": "No", "sessionId": session}, key="k2")
    assert (status, both["round"]) == (200, 2)
    model_server.enqueue("Yes again")
    status, later = await chat(api, yes, key="k3")
    assert (status, later["round"]) == (200, 3)
    assert await chat(api, yes, key="k1") == (200, both)
    assert len(model_server.requests) == 4
    assert await user_messages(api, session) == ["Start", "Yes", "No", "Yes"]


async def test_a_retry_whose_message_was_answered_with_the_next_one_takes_no_new_round(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A worker died after storing the key's message, before the model answered (its claim
    still names it); another request's round then answered that message too. Once the
    lease ran out, the retry replays that round: its message is not stored again and the
    model is not asked again."""
    _, opened = await chat(api, {"message": "Start", "maxRounds": 5}, key="k0")
    session = opened["sessionId"]
    question = {"message": "Question", "sessionId": session}
    model_server.enqueue(status=500)
    status, _ = await chat(api, question, key="k1")
    assert status == 503
    with sqlite3.connect(api.settings.db_path) as db:  # what the crash leaves behind
        db.execute(
            "UPDATE idempotency_keys SET owner = 'dead', lease_until = ? WHERE key = 'k1'",
            (time.time() - 1,),
        )
    model_server.enqueue("Both answered")
    status, both = await chat(api, {"message": "More", "sessionId": session}, key="k2")
    assert (status, both["round"]) == (200, 2)
    assert await chat(api, question, key="k1") == (200, both)
    assert len(model_server.requests) == 3
    assert await user_messages(api, session) == ["Start", "Question", "More"]


def _lease(db_path: str) -> float | None:
    with sqlite3.connect(db_path) as db:
        row = db.execute(
            "SELECT lease_until FROM idempotency_keys WHERE key = ?", (KEY,)
        ).fetchone()
    return None if row is None else row[0]


async def test_a_request_longer_than_its_lease_is_answered_once_while_its_retry_waits(
    api: RunningApi, model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder renews its lease well before it runs out (a third of the way), so a
    retry waiting through three leases never finds it run out and never takes a live
    request over: one model call, both get its reply. Each renewal is seen while the lease
    it replaces still had time left."""
    monkeypatch.setattr(key_claims, "LEASE_SECONDS", 1.2)
    release = asyncio.Event()
    model_server.enqueue("Slow answer", hold=release)
    body = {"message": "Question", "maxRounds": 2}
    first = asyncio.create_task(chat(api, body))
    await model_server.wait_requests(1)
    retry = asyncio.create_task(chat(api, body))
    leases: list[float] = []
    late: list[float] = []  # how long a lease had run out when its renewal was seen
    async with asyncio.timeout(60):
        while len(leases) < 4:  # the claim's lease and three renewals
            lease, now = _lease(api.settings.db_path), time.time()
            assert lease is not None
            if not leases or lease != leases[-1]:
                if leases and leases[-1] <= now:
                    late.append(now - leases[-1])
                leases.append(lease)
            await asyncio.sleep(0.005)
    assert not retry.done()
    release.set()
    (status, answer), again = await asyncio.gather(first, retry)

    assert status == 200 and again == (200, answer)
    assert len(model_server.requests) == 1
    assert late == []
