"""`followUp` on `POST /api/chat` and its stream: a question about a complete session,
answered directly and stored in it; every refusal a plain JSON error with its reason."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from openai._streaming import SSEDecoder

from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi

pytestmark = pytest.mark.api_settings(followup_limit=2)


async def post(
    api: RunningApi, body: Any, *, idempotency_key: str | None = None
) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    response = await api.client.post("/api/chat", data=json.dumps(body), headers=headers)
    return response.status, await response.json()


async def finished(api: RunningApi, model_server: FakeModelServer) -> str:
    """A single-round session, answered; its id."""
    model_server.enqueue("Use PostgreSQL.")
    status, body = await post(api, {"message": "How do I scale my app?"})
    assert (status, body["isComplete"], "followUpsLeft" in body) == (200, True, False)
    return str(body["sessionId"])


async def test_a_follow_up_is_answered_with_the_session_in_view(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    session = await finished(api, model_server)
    model_server.enqueue("Pool the connections.")
    status, body = await post(
        api, {"message": "And connections?", "sessionId": session, "followUp": True}
    )
    assert status == 200
    assert body == {
        "content": "Pool the connections.", "model": "test-model", "isComplete": True,
        "round": 1, "maxRounds": 1, "sessionId": session, "questions": [],
        "readyForFinal": False, "followUp": 1, "followUpsLeft": 1,
    }  # fmt: skip
    sent = model_server.requests[-1]["messages"]
    assert [m["content"] for m in sent[1:]] == [
        "How do I scale my app?",
        "Use PostgreSQL.",
        "And connections?",
    ]
    assert "follow-up question" in sent[0]["content"]
    view = await (await api.client.get(f"/api/sessions/{session}")).json()
    assert [m["text"] for m in view["messages"]][-2:] == [
        "And connections?",
        "Pool the connections.",
    ]
    assert (view["status"], view["round"]) == ("complete", 1)


async def test_without_follow_up_a_complete_session_is_still_dialog_completed(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    session = await finished(api, model_server)
    status, error = await post(api, {"message": "More?", "sessionId": session})
    assert (status, error["code"]) == (400, "DIALOG_COMPLETED")


async def test_past_the_limit_a_follow_up_is_refused_with_its_reason(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """FOLLOWUP_LIMIT=2: the second answer has none left; the third is 409 with
    reason limit_reached, the model not called and nothing stored."""
    session = await finished(api, model_server)
    for n in (1, 2):
        status, body = await post(api, {"message": f"Q{n}", "sessionId": session, "followUp": True})
        assert (status, body["followUp"], body.get("followUpsLeft", 0)) == (200, n, 2 - n)
    calls = len(model_server.requests)
    status, error = await post(api, {"message": "Q3", "sessionId": session, "followUp": True})
    assert (status, error["code"], error["reason"]) == (
        409,
        "FOLLOW_UP_UNAVAILABLE",
        "limit_reached",
    )
    assert "FOLLOWUP_LIMIT" in error["error"]
    assert len(model_server.requests) == calls
    view = await (await api.client.get(f"/api/sessions/{session}")).json()
    assert view["messages"][-1]["text"] == "Reply to: Q2"


async def test_a_session_still_in_its_rounds_takes_no_follow_up(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    model_server.enqueue("Which database?")
    status, body = await post(api, {"message": "How do I scale?", "maxRounds": 3})
    assert status == 200
    status, error = await post(
        api, {"message": "More?", "sessionId": body["sessionId"], "followUp": True}
    )
    assert (status, error["code"], error["reason"]) == (
        409,
        "FOLLOW_UP_UNAVAILABLE",
        "not_complete",
    )
    view = await (await api.client.get(f"/api/sessions/{body['sessionId']}")).json()
    assert len(view["messages"]) == 2


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"message": "More?", "followUp": True}, "VALIDATION_ERROR"),
        (
            {"message": "More?", "followUp": "yes", "sessionId": str(uuid.uuid4())},
            "VALIDATION_ERROR",
        ),
        ({"message": "More?", "followUp": 1, "sessionId": str(uuid.uuid4())}, "VALIDATION_ERROR"),
        ({"message": "   ", "followUp": True, "sessionId": str(uuid.uuid4())}, "VALIDATION_ERROR"),
        (
            {
                "message": "x",
                "followUp": True,
                "sessionId": str(uuid.uuid4()),
                "answers": [{"question": 1, "option": 1}],
            },
            "VALIDATION_ERROR",
        ),
        (
            {"message": "More?", "followUp": True, "sessionId": str(uuid.uuid4())},
            "SESSION_NOT_FOUND",
        ),
    ],
)
async def test_malformed_or_unknown_follow_ups_are_refused_before_the_model(
    api: RunningApi, model_server: FakeModelServer, body: dict[str, Any], code: str
) -> None:
    status, error = await post(api, body)
    assert error["code"] == code, error
    assert status in (400, 404)
    assert model_server.requests == []


async def test_a_retried_follow_up_with_its_key_is_answered_once(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The same Idempotency-Key again replays the follow-up's answer: one model call, one
    stored follow-up."""
    session = await finished(api, model_server)
    body = {"message": "Connections?", "sessionId": session, "followUp": True}
    first_status, first = await post(api, body, idempotency_key="k-1")
    calls = len(model_server.requests)
    again_status, again = await post(api, body, idempotency_key="k-1")
    assert (first_status, again_status) == (200, 200)
    assert again == first and len(model_server.requests) == calls
    view = await (await api.client.get(f"/api/sessions/{session}")).json()
    assert len(view["messages"]) == 4


async def test_the_stream_answers_a_follow_up_and_refuses_as_plain_json(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    session = await finished(api, model_server)
    model_server.enqueue("Pool them.")
    response = await api.client.post(
        "/api/chat/stream", json={"message": "Connections?", "sessionId": session, "followUp": True}
    )
    events = [e async for e in SSEDecoder().aiter_bytes(response.content.iter_any())]
    done = next(e for e in events if e.event == "done").json()
    assert (done["content"], done["followUp"]) == ("Pool them.", 1)
    await post(api, {"message": "Q2", "sessionId": session, "followUp": True})
    refused = await api.client.post(
        "/api/chat/stream", json={"message": "Q3", "sessionId": session, "followUp": True}
    )
    assert refused.status == 409
    assert refused.headers["Content-Type"].startswith("application/json")
    assert (await refused.json())["reason"] == "limit_reached"
