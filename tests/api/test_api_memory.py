"""Client memory over the HTTP API: a session started with a `userId` is remembered once
it completes (without delaying its response), offered to that user's next session, read
back and deleted through `/api/users/{userId}/memory`; without a `userId` nothing is kept,
and hostile user and fact ids change nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes.model_server import FakeModelServer, text_of
from tests.api_harness import RunningApi
from tests.waiting import until

pytestmark = pytest.mark.api_settings(memory_enabled=True)

HEADING = "What this person told you in earlier consultations"


async def post(api: RunningApi, body: dict[str, Any]) -> tuple[int, Any]:
    response = await api.client.post(
        "/api/chat", data=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    return response.status, await response.json()


async def facts(api: RunningApi, user: str) -> tuple[int, Any]:
    response = await api.client.get(f"/api/users/{user}/memory")
    return response.status, await response.json()


async def stored(api: RunningApi, user: str, count: int) -> list[dict[str, Any]]:
    """The user's facts once there are `count` (extraction runs after the response)."""

    async def holds() -> bool:
        return len((await facts(api, user))[1]["facts"]) == count

    await until(holds, f"{user} has {count} facts")
    return list((await facts(api, user))[1]["facts"])


async def test_a_completed_session_is_remembered_for_its_user(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The response comes first; the facts are read back, sent in the user's next session
    and deleted by id."""
    model_server.enqueue("Use drip irrigation.")
    model_server.enqueue("Lives in Riga\nGrows tomatoes")
    status, body = await post(
        api, {"message": "I live in Riga and grow tomatoes.", "userId": "u-1"}
    )
    assert status == 200 and body["isComplete"] and body["content"] == "Use drip irrigation."
    kept = await stored(api, "u-1", 2)
    assert [f["text"] for f in kept] == ["Grows tomatoes", "Lives in Riga"]
    assert all(isinstance(f["id"], int) and f["createdAt"] for f in kept)

    model_server.enqueue("Next answer.")
    model_server.enqueue("none")
    status, _ = await post(api, {"message": "What now?", "userId": "u-1"})
    assert status == 200
    await model_server.wait_requests(4)
    system = text_of(model_server.requests[2]["messages"][0]["content"])
    assert HEADING in system and "- Lives in Riga" in system

    response = await api.client.delete(f"/api/users/u-1/memory/{kept[0]['id']}")
    assert response.status == 204
    response = await api.client.delete(f"/api/users/u-1/memory/{kept[0]['id']}")
    assert response.status == 404 and (await response.json())["code"] == "FACT_NOT_FOUND"
    assert [f["text"] for f in (await facts(api, "u-1"))[1]["facts"]] == ["Lives in Riga"]


async def test_without_a_user_id_nothing_is_remembered(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A session without `userId` makes no extraction call and sends no facts."""
    await api.store.add_facts("api:u-1", "api:u-1", ["Lives in Riga"], at=1.0)
    model_server.enqueue("Answer.")
    status, body = await post(api, {"message": "I live in Oslo."})
    assert status == 200 and body["isComplete"]
    assert HEADING not in text_of(model_server.requests[0]["messages"][0]["content"])
    model_server.enqueue("Second.")
    await post(api, {"message": "Another."})
    assert len(model_server.requests) == 2  # no extraction in between


async def test_one_users_facts_are_not_another_users(api: RunningApi) -> None:
    """A fact of another user, or of a Telegram person, is neither listed nor deleted."""
    (other,) = await api.store.add_facts("api:u-2", "api:u-2", ["Other user's fact"], at=1.0)
    (person,) = await api.store.add_facts("tg:5", "tg:5", ["Telegram fact"], at=1.0)
    assert (await facts(api, "u-1"))[1] == {"userId": "u-1", "facts": []}
    for fact in (other, person):
        response = await api.client.delete(f"/api/users/u-1/memory/{fact.id}")
        assert response.status == 404
    assert (await facts(api, "u-2"))[1]["facts"][0]["text"] == "Other user's fact"
    assert (await api.store.load_memory("tg:5", "tg:5")).facts == (person,)


@pytest.mark.parametrize("user", ["", "a" * 65, "bad user", "x%00y", "ü", "a/b"])
async def test_malformed_user_ids_are_refused(api: RunningApi, user: str) -> None:
    """A user id outside 1–64 of [A-Za-z0-9_.:@-] is refused on every route, nothing
    stored."""
    status, body = await post(api, {"message": "Hi", "userId": user})
    assert status == 400 and body["code"] == "VALIDATION_ERROR"
    assert api.engine is not None
    if user and "/" not in user:
        response = await api.client.get(f"/api/users/{user}/memory")
        assert response.status == 400


async def test_a_user_id_of_another_type_is_refused(api: RunningApi) -> None:
    """`userId` must be a string: a number is refused, never coerced."""
    status, body = await post(api, {"message": "Hi", "userId": 5})
    assert status == 400 and body["code"] == "VALIDATION_ERROR"


@pytest.mark.parametrize(
    "fact", ["abc", "-1", "0", "1.5", "99999999999999999999", "9" * 500, "%D9%A1"]
)
async def test_malformed_fact_ids_change_nothing(api: RunningApi, fact: str) -> None:
    """A fact id that is no positive 64-bit integer is FACT_NOT_FOUND."""
    await api.store.add_facts("api:u-1", "api:u-1", ["Kept"], at=1.0)
    response = await api.client.delete(f"/api/users/u-1/memory/{fact}")
    assert response.status == 404
    assert (await response.json())["code"] == "FACT_NOT_FOUND"
    assert len((await facts(api, "u-1"))[1]["facts"]) == 1


async def test_the_openapi_document_names_the_memory_routes(api: RunningApi) -> None:
    """`userId` and both memory routes are in the OpenAPI document."""
    document = await (await api.client.get("/api/openapi.json")).json()
    assert "userId" in document["components"]["schemas"]["ChatRequest"]["properties"]
    assert "get" in document["paths"]["/api/users/{userId}/memory"]
    assert "delete" in document["paths"]["/api/users/{userId}/memory/{factId}"]


async def test_forgetting_a_user_deletes_all_their_facts_and_no_one_elses(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Every fact and the preferences of the user go; another user's and a Telegram
    person's stay; the next session of that user is sent none of it."""
    await api.store.add_facts("api:u-1", "api:u-1", ["Lives in Riga", "Has a dog"], at=1.0)
    await api.store.add_facts("api:u-1x", "api:u-1x", ["Other user's fact"], at=1.0)
    await api.store.add_facts("tg:5", "tg:5", ["Telegram fact"], at=1.0)
    response = await api.client.delete("/api/users/u-1/memory")
    assert response.status == 204
    assert (await facts(api, "u-1"))[1] == {"userId": "u-1", "facts": []}
    assert len((await facts(api, "u-1x"))[1]["facts"]) == 1
    assert len((await api.store.load_memory("tg:5", "tg:5")).facts) == 1
    assert (await api.client.delete("/api/users/u-1/memory")).status == 204  # idempotent

    model_server.enqueue("Answer.")
    model_server.enqueue("none")
    status, _ = await post(api, {"message": "Where should I walk?", "userId": "u-1"})
    assert status == 200
    assert "Riga" not in text_of(model_server.requests[0]["messages"][0]["content"])
    response = await api.client.delete("/api/users/bad%20user/memory")
    assert response.status == 400


async def test_a_session_under_way_goes_on_without_the_facts_of_a_forgotten_user(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A session reads its user's facts when it starts; once they are forgotten, its next
    rounds are sent none of them, the store keeps none of them with it, and its end notes
    nothing new for that user. Another user's session keeps theirs."""
    await api.store.add_facts("api:u-2", "api:u-2", ["Lives in Riga"], at=1.0)
    await api.store.add_facts("api:u-3", "api:u-3", ["Lives in Oslo"], at=1.0)
    sessions = {}
    for user in ("u-2", "u-3"):
        model_server.enqueue("Which season?")
        status, body = await post(api, {"message": "Plan a walk", "userId": user, "maxRounds": 2})
        assert status == 200 and not body["isComplete"]
        sessions[user] = body["sessionId"]
    assert "Riga" in text_of(model_server.requests[0]["messages"][0]["content"])
    assert (await api.client.delete("/api/users/u-2/memory")).status == 204
    stored_session = await api.store.get(sessions["u-2"])
    assert stored_session is not None and stored_session.memory_facts == ()
    assert stored_session.person == "api:u-2"
    model_server.enqueue("Walk along the river.")
    status, body = await post(api, {"message": "Spring", "sessionId": sessions["u-2"]})
    assert status == 200 and body["isComplete"]
    assert "Riga" not in json.dumps(model_server.requests[2]["messages"])
    model_server.enqueue("Which park?")
    status, _ = await post(api, {"message": "Winter", "sessionId": sessions["u-3"]})
    assert status == 200
    await model_server.wait_requests(4)
    assert "Oslo" in text_of(model_server.requests[3]["messages"][0]["content"])
    assert (await facts(api, "u-2"))[1]["facts"] == []
