"""What a session read back and a replayed answer keep of its rounds, through a real server,
the real openai SDK (fake model) and real SQLite: each reply's questions and whether its
final answer came because the model was ready (`readyForFinal`), as the OpenAPI document
describes them."""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi

pytestmark = pytest.mark.api_settings(llm_structured_questions="auto")

BUDGET = ("What is your budget?", ["< 500", "500–1000", "1000+"])


async def post(
    api: RunningApi, body: dict[str, Any], key: str | None = None
) -> tuple[int, dict[str, Any]]:
    headers = {} if key is None else {"Idempotency-Key": key}
    response = await api.client.post("/api/chat", json=body, headers=headers)
    result: dict[str, Any] = await response.json()
    return response.status, result


async def session_view(api: RunningApi, session: str) -> dict[str, Any]:
    response = await api.client.get(f"/api/sessions/{session}")
    assert response.status == 200
    view: dict[str, Any] = await response.json()
    return view


async def test_a_session_read_back_keeps_each_replys_questions_and_ready_flag(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Round 1 asked a question with options; round 2 said it knew enough, so its reply is
    the final answer with `readyForFinal: true`. Read back, every message says what its
    reply said, and the view follows the OpenAPI document."""
    model_server.enqueue_round("Got it.", [BUDGET])
    status, first = await post(api, {"message": "Which laptop?", "maxRounds": 3})
    assert status == 200
    session = first["sessionId"]
    model_server.enqueue_round("", [], True)
    model_server.enqueue("Buy the ThinkPad.")
    status, final = await post(
        api, {"sessionId": session, "answers": [{"question": 1, "option": 2}]}
    )
    assert (status, final["readyForFinal"], final["isComplete"]) == (200, True, True)

    view = await session_view(api, session)
    shown = [(m["role"], m["questions"], m["readyForFinal"]) for m in view["messages"]]
    assert shown == [
        ("user", [], False),
        ("assistant", [{"text": BUDGET[0], "options": BUDGET[1]}], False),
        ("user", [], False),
        ("assistant", [], True),
    ]
    assert view["messages"][-1]["text"] == "Buy the ThinkPad."

    document = await (await api.client.get("/api/openapi.json")).json()
    components = document["components"]
    schema = {"$ref": "#/components/schemas/SessionView", "components": components}
    Draft202012Validator(schema).validate(view)
    message = components["schemas"]["SessionMessage"]
    assert {"questions", "readyForFinal"} <= set(message["required"])


async def test_a_replayed_final_answer_still_says_the_model_was_ready(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The process stopped after storing the final answer but before the key's reply: the
    retry replays it from the session, `readyForFinal` included, without a model call."""
    key = str(uuid.uuid4())
    model_server.enqueue_round("", [], True)
    model_server.enqueue("Buy the ThinkPad.")
    body = {"message": "Which laptop?", "maxRounds": 3}
    status, answer = await post(api, body, key)
    assert (status, answer["readyForFinal"]) == (200, True)
    with sqlite3.connect(api.settings.db_path) as db:  # what the crash leaves behind
        db.execute("UPDATE idempotency_keys SET response = NULL")
    calls = len(model_server.requests)

    status, again = await post(api, body, key)

    assert (status, again) == (200, answer)
    assert len(model_server.requests) == calls
