"""Structured clarifying rounds over the HTTP API, through a real server, the real openai SDK
(fake model) and real SQLite: the questions and the ready flag in every kind of reply,
`answers` reaching the model as question–answer lines, every way a request can get them
wrong, and the OpenAPI document describing all of it."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openai._streaming import SSEDecoder

from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi

pytestmark = pytest.mark.api_settings(llm_structured_questions="auto")

BUDGET = ("What is your budget?", ["< 500", "500–1000", "1000+"])
CITY = ("Which city do you live in?", ["Moscow", "Berlin"])


async def post(
    api: RunningApi, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    response = await api.client.post(
        "/api/chat", data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    result: dict[str, Any] = await response.json()
    return response.status, result


async def asked(
    api: RunningApi, model: FakeModelServer, *questions: tuple[str, list[str]], rounds: int = 3
) -> str:
    """A session of `rounds` rounds whose first reply asked `questions`; its id."""
    model.enqueue_round("Got it.", questions)
    status, body = await post(api, {"message": "Which laptop should I buy?", "maxRounds": rounds})
    assert status == 200, body
    return str(body["sessionId"])


def last_user_turn(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


async def stored_messages(api: RunningApi, session: str) -> list[dict[str, Any]]:
    response = await api.client.get(f"/api/sessions/{session}")
    view: dict[str, Any] = await response.json()
    return list(view["messages"])


async def test_a_structured_round_carries_its_questions_in_plain_and_streamed_replies(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A round asked as JSON comes back as `questions` with their options, `content` its
    text without options, in `/api/chat` and in the stream's `done` event alike."""
    model_server.enqueue_round("I need two facts.", [BUDGET, CITY])
    status, body = await post(api, {"message": "Which laptop?", "maxRounds": 3})
    assert status == 200
    assert body["questions"] == [
        {"text": BUDGET[0], "options": BUDGET[1]},
        {"text": CITY[0], "options": CITY[1]},
    ]
    assert body["content"] == f"I need two facts.\n\n1. {BUDGET[0]}\n2. {CITY[0]}"
    assert body["readyForFinal"] is False and body["isComplete"] is False

    model_server.enqueue_round("I need two facts.", [BUDGET, CITY], chunk_size=7)
    response = await api.client.post(
        "/api/chat/stream", json={"message": "Which laptop?", "maxRounds": 3}
    )
    events = [e async for e in SSEDecoder().aiter_bytes(response.content.iter_any())]
    assert events[-1].event == "done"
    done = events[-1].json()
    assert done["questions"] == body["questions"] and done["content"] == body["content"]
    assert "{" not in "".join(e.json().get("content", "") for e in events[1:-1])


async def test_ready_for_final_marks_the_answer_the_model_chose_to_give(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A round saying it knows enough goes on to the final answer, which says
    `readyForFinal: true` and asks no questions."""
    model_server.enqueue_round("", [], True)
    model_server.enqueue("Buy the ThinkPad.")
    status, body = await post(api, {"message": "Which laptop?", "maxRounds": 3})
    assert status == 200
    assert body["content"] == "Buy the ThinkPad."
    assert body["readyForFinal"] is True and body["isComplete"] is True
    assert body["questions"] == []


async def test_answers_by_option_and_by_text_reach_the_model_as_question_answer_lines(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """`answers` alone make the user's turn: one numbered `question — answer` line each,
    an option by its text, a typed answer as typed."""
    session = await asked(api, model_server, BUDGET, CITY)
    model_server.enqueue_round("Got it.", [("Which screen size?", [])])
    answers = [{"question": 2, "text": "  Paris,\nnear the station "}, {"question": 1, "option": 2}]
    status, body = await post(api, {"sessionId": session, "answers": answers})
    assert status == 200, body
    expected = f"1. {BUDGET[0]} — 500–1000\n2. {CITY[0]} — Paris, near the station"
    assert last_user_turn(model_server.requests[-1]) == expected
    assert (await stored_messages(api, session))[2]["text"] == expected
    assert body["round"] == 2 and body["questions"] == [
        {"text": "Which screen size?", "options": []}
    ]


async def test_answers_with_a_message_come_before_it(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Answers sent with a message are its first lines; the message follows them."""
    session = await asked(api, model_server, BUDGET)
    model_server.enqueue_round("Got it.", [CITY])
    status, body = await post(
        api,
        {"sessionId": session, "answers": [{"question": 1, "option": 3}], "message": "For games"},
    )
    assert status == 200, body
    assert last_user_turn(model_server.requests[-1]) == f"{BUDGET[0]} — 1000+\nFor games"


async def test_answers_naming_what_the_round_lacks_are_answer_invalid_and_store_nothing(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A question or option the last reply does not have is 422 ANSWER_INVALID, on the
    streaming endpoint too as a plain JSON error; the model is not called, nothing stored."""
    session = await asked(api, model_server, BUDGET, CITY)
    calls = len(model_server.requests)
    for answers in (
        [{"question": 3, "option": 1}],
        [{"question": 2, "option": 3}],
        [{"question": 1, "option": 1}, {"question": 9, "text": "x"}],
    ):
        status, body = await post(api, {"sessionId": session, "answers": answers})
        assert (status, body["code"]) == (422, "ANSWER_INVALID"), body
        response = await api.client.post(
            "/api/chat/stream", json={"sessionId": session, "answers": answers, "maxRounds": 5}
        )
        assert response.status == 422
        assert response.headers["Content-Type"].startswith("application/json")
        assert (await response.json())["code"] == "ANSWER_INVALID"
    assert len(model_server.requests) == calls
    view = await (await api.client.get(f"/api/sessions/{session}")).json()
    assert len(view["messages"]) == 2 and view["maxRounds"] == 3


@pytest.mark.api_settings(llm_structured_questions="off")
async def test_answers_to_a_round_asked_in_text_are_answer_stale(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Answers when the last reply asked its questions as plain text are 409 ANSWER_STALE,
    nothing stored; the same session still takes a message."""
    model_server.enqueue("What is your budget?")
    status, body = await post(api, {"message": "Which laptop?", "maxRounds": 3})
    assert status == 200 and body["questions"] == []
    session = body["sessionId"]
    status, body = await post(
        api, {"sessionId": session, "answers": [{"question": 1, "option": 1}]}
    )
    assert (status, body["code"]) == (409, "ANSWER_STALE")
    assert len(model_server.requests) == 1
    assert len(await stored_messages(api, session)) == 2
    model_server.enqueue("Which city?")
    status, body = await post(api, {"sessionId": session, "message": "About 800"})
    assert status == 200 and body["round"] == 2


async def test_malformed_answers_are_refused_with_400_before_anything_happens(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Hostile or malformed `answers` (too many, oversized, wrong types, unknown keys, both
    or neither of option and text, NUL, no session) are 400 VALIDATION_ERROR naming the
    field; the model is never called and the session is unchanged."""
    session = await asked(api, model_server, BUDGET, CITY)
    calls = len(model_server.requests)
    one = {"question": 1, "option": 1}
    bad: list[Any] = [
        [one] * 10_000,
        [one] * 9,
        [{"question": 1, "text": "x" * 4001}],
        [{"question": 1, "text": "x" * 500_000}],
        [{"question": "1", "option": 1}],
        [{"question": 1, "option": "2"}],
        [{"question": 1, "option": 1.5}],
        [{"question": True, "option": 1}],
        [{"question": 1, "option": None}],
        [{"question": 0, "option": 1}],
        [{"question": 1, "option": 0}],
        [{"question": -1, "option": 1}],
        [{"question": 1, "option": 1, "text": "both"}],
        [{"question": 1}],
        [{"question": 1, "text": " \n "}],
        [{"question": 1, "text": "a\x00b"}],
        [{"question": 1, "option": 1, "by": "someone else"}],
        [{"option": 1}],
        [[1, 1]],
        ["1a"],
        {"question": 1, "option": 1},
        "1a 2b",
    ]
    for answers in bad:
        status, body = await post(api, {"sessionId": session, "answers": answers})
        assert (status, body["code"]) == (400, "VALIDATION_ERROR"), (answers, body)
        assert body["error"].startswith("answers"), body
    status, body = await post(api, {"message": "Hi", "answers": [one]})
    assert (status, body["code"]) == (400, "VALIDATION_ERROR")
    assert "sessionId" in body["error"]
    status, body = await post(api, {"sessionId": session, "answers": []})
    assert (status, body["error"]) == (400, "message: is required")
    assert len(model_server.requests) == calls
    assert len(await stored_messages(api, session)) == 2


async def test_an_idempotent_replay_carries_the_questions_and_the_key_covers_the_answers(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A retry with the same key gets the stored reply, questions included, without a new
    round; the same key with other answers is 422 IDEMPOTENCY_KEY_REUSED."""
    session = await asked(api, model_server, BUDGET, CITY)
    model_server.enqueue_round("Got it.", [("Which screen size?", ["13", "15"])])
    key = {"Idempotency-Key": str(uuid.uuid4())}
    request = {"sessionId": session, "answers": [{"question": 1, "option": 1}]}
    status, first = await post(api, request, key)
    assert status == 200
    calls = len(model_server.requests)
    response = await api.client.post("/api/chat", json=request, headers=key)
    assert response.status == 200 and response.headers["Idempotent-Replayed"] == "true"
    again = await response.json()
    assert again == first
    assert again["questions"] == [{"text": "Which screen size?", "options": ["13", "15"]}]
    other = {"sessionId": session, "answers": [{"question": 1, "option": 2}]}
    status, body = await post(api, other, key)
    assert (status, body["code"]) == (422, "IDEMPOTENCY_KEY_REUSED")
    assert len(model_server.requests) == calls


async def test_the_openapi_document_describes_questions_answers_and_their_errors(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Real replies with questions, the answer errors and the request bodies with answers
    match the document, which agrees with the parser on every body tried."""
    document = await (await api.client.get("/api/openapi.json")).json()
    for schema in document["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)
    assert document["info"]["version"] == "1.8.0"
    components = document["components"]
    operation = document["paths"]["/api/chat"]["post"]

    def response_valid(status: int, body: Any) -> None:
        schema = operation["responses"][str(status)]["content"]["application/json"]["schema"]
        Draft202012Validator({**schema, "components": components}).validate(body)

    request_schema = {"$ref": "#/components/schemas/ChatRequest", "components": components}
    requests = Draft202012Validator(request_schema)
    assert {"ANSWER_INVALID", "ANSWER_STALE"} <= set(
        components["schemas"]["ErrorResponse"]["properties"]["code"]["enum"]
    )
    assert {"questions", "readyForFinal"} <= set(components["schemas"]["ChatResponse"]["required"])

    session = await asked(api, model_server, BUDGET, CITY, rounds=10)
    one = {"question": 1, "option": 1}
    bodies: list[tuple[dict[str, Any], int]] = [
        ({"sessionId": session, "answers": [{"question": 9, "option": 1}]}, 422),
        ({"sessionId": session, "answers": [one], "message": " "}, 200),
        ({"sessionId": session, "answers": [{"question": 1, "option": 1, "text": None}]}, 200),
        ({"sessionId": session, "answers": [{"question": 1, "option": None, "text": "x"}]}, 200),
        ({"sessionId": session, "answers": [{"question": 1, "option": 2.0}]}, 200),
        ({"sessionId": session, "answers": [{"question": 1, "option": 1, "text": "x"}]}, 400),
        ({"sessionId": session, "answers": [{"question": 1}]}, 400),
        ({"sessionId": session, "answers": [{"question": 1, "text": "x" * 4001}]}, 400),
        ({"sessionId": session, "answers": [{"question": 1, "text": ""}]}, 400),
        ({"sessionId": session, "answers": [{"question": 1, "option": 1, "x": 1}]}, 400),
        ({"sessionId": session, "answers": [one] * 9}, 400),
        ({"sessionId": None, "answers": [one], "message": "Hi"}, 400),
        ({"answers": [one], "message": "Hi"}, 400),
        ({"sessionId": session, "answers": []}, 400),
    ]
    seen: list[tuple[int, dict[str, Any]]] = []
    for body, expected in bodies:
        if expected == 200:
            model_server.enqueue_round("Got it.", [BUDGET, CITY])
        status, answer = await post(api, body)
        seen.append((status, answer))
        assert status == expected, (body, answer)
        # 422: the body is well formed, the round has no such question
        assert (status in (200, 422)) is requests.is_valid(body), (body, answer)
    model_server.enqueue_round("", [], True)
    model_server.enqueue("The answer.")
    status, final = await post(
        api, {"sessionId": session, "answers": [{"question": 2, "text": "Rome"}]}
    )
    seen.append((status, final))
    status, stale = await post(api, {"sessionId": session, "answers": [one]})
    seen.append((status, stale))
    assert final["readyForFinal"] is True and stale["code"] == "DIALOG_COMPLETED"
    codes = {answer.get("code", "OK") for _, answer in seen}
    assert {"OK", "ANSWER_INVALID", "VALIDATION_ERROR"} <= codes
    for status, answer in seen:
        response_valid(status, answer)


@pytest.mark.api_settings(llm_structured_questions="off")
async def test_answer_stale_matches_the_openapi_document(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The 409 ANSWER_STALE body follows the document's error schema for that status."""
    document = await (await api.client.get("/api/openapi.json")).json()
    model_server.enqueue("What is your budget?")
    _, body = await post(api, {"message": "Which laptop?", "maxRounds": 3})
    status, stale = await post(
        api, {"sessionId": body["sessionId"], "answers": [{"question": 1, "option": 1}]}
    )
    assert status == 409
    schema = document["paths"]["/api/chat"]["post"]["responses"]["409"]["content"][
        "application/json"]["schema"]  # fmt: skip
    Draft202012Validator({**schema, "components": document["components"]}).validate(stale)
