"""`POST /api/chat` over a real server, the real openai SDK (fake model) and real SQLite."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from api.attachments import chat_body_limit
from core.domain.consultation import Role
from fakes.model_server import FakeModelServer
from media.intake import Intake
from media.reader_pool import DocumentReaders
from tests.api_harness import RunningApi, api_settings, running_api

REQUEST = 'Помоги подобрать веса для "хаммер" и бабочки — сколько повторений?'


pytestmark = pytest.mark.api_settings(
    max_rounds_limit=10,
    llm_models=("test-model", "sonar"),
    max_document_bytes=1000,  # with the image limit, keeps the chat body limit near 1 MB
    max_image_bytes=1000,
)


async def post(api: RunningApi, body: Any, *, raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else json.dumps(body).encode()
    response = await api.client.post(
        "/api/chat", data=data, headers={"Content-Type": "application/json"}
    )
    return response.status, await response.json()


async def test_three_round_dialog_ends_with_the_final_round_prompt(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Three rounds share one session; the third request carries the original message verbatim."""
    model_server.enqueue("Какие упражнения?")
    model_server.enqueue("Какой у вас опыт?")
    model_server.enqueue("## План\n- Хаммер: 3×12")
    first_body = {
        "systemPrompt": "Ты - эксперт в области спорта и тренажерного зала",
        "message": REQUEST, "model": "sonar", "maxTokens": 256, "disableSearch": True,
        "maxRounds": 3,
    }  # fmt: skip
    status, first = await post(api, first_body)
    assert status == 200
    session = first["sessionId"]
    assert first == {"content": "Какие упражнения?", "model": "sonar", "isComplete": False,
                     "round": 1, "maxRounds": 3, "sessionId": session, "questions": [],
                     "readyForFinal": False}  # fmt: skip
    sent = model_server.requests[0]
    assert sent["model"] == "sonar" and sent["max_tokens"] == 256
    assert sent["disable_search"] is True
    assert "эксперт в области спорта" in sent["messages"][0]["content"]

    status, second = await post(api, {**first_body, "message": "Хаммер, бабочка",
                                       "sessionId": session})  # fmt: skip
    assert (status, second["round"], second["isComplete"]) == (200, 2, False)
    status, third = await post(api, {"message": "Новичок, 2 месяца", "sessionId": session})
    assert (status, third["round"], third["maxRounds"], third["isComplete"]) == (200, 3, 3, True)
    assert third["content"] == "## План\n- Хаммер: 3×12"

    system = model_server.requests[-1]["messages"][0]["content"]
    assert "round 3 of 3" in system
    assert f"\n> {REQUEST}\n" in system
    assert [m["role"] for m in model_server.requests[-1]["messages"]] == [
        "system", "user", "assistant", "user", "assistant", "user"]  # fmt: skip


async def test_without_max_rounds_one_round_completes_the_dialog(api: RunningApi) -> None:
    """No maxRounds is single-round mode; continuing afterwards is DIALOG_COMPLETED."""
    status, body = await post(api, {"message": "What is 2+2?"})
    assert (status, body["round"], body["maxRounds"], body["isComplete"]) == (200, 1, 1, True)
    status, error = await post(api, {"message": "And 3+3?", "sessionId": body["sessionId"]})
    assert (status, error["code"]) == (400, "DIALOG_COMPLETED")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"message": "   "}, "VALIDATION_ERROR"),
        ({"message": ""}, "VALIDATION_ERROR"),
        ({}, "VALIDATION_ERROR"),
        ({"message": 5}, "VALIDATION_ERROR"),
        ({"message": "hi", "disableSearch": "yes"}, "VALIDATION_ERROR"),
        ({"message": "hi", "maxTokens": "100"}, "VALIDATION_ERROR"),
        ({"message": "hi", "outputFormat": "xml"}, "VALIDATION_ERROR"),
        ({"message": "hi", "sessionId": "not-a-uuid"}, "VALIDATION_ERROR"),
        (["message"], "VALIDATION_ERROR"),
        ({"message": "hi", "maxRounds": 0}, "INVALID_MAX_ROUNDS"),
        ({"message": "hi", "maxRounds": -2}, "INVALID_MAX_ROUNDS"),
        ({"message": "hi", "maxRounds": "3"}, "INVALID_MAX_ROUNDS"),
        ({"message": "hi", "maxRounds": 2.5}, "INVALID_MAX_ROUNDS"),
        ({"message": "hi", "maxRounds": True}, "INVALID_MAX_ROUNDS"),
        ({"message": "hi", "maxRounds": 11}, "MAX_ROUNDS_EXCEEDED"),
    ],
)
async def test_invalid_requests_are_refused_before_the_model(
    api: RunningApi, model_server: FakeModelServer, body: Any, code: str
) -> None:
    """Each invalid body gets 400 with its code, and the model is never called."""
    status, error = await post(api, body)
    assert (status, error["code"]) == (400, code)
    assert isinstance(error["error"], str) and error["error"]
    assert model_server.requests == []


async def test_malformed_json_unknown_session_and_http_errors_are_json(api: RunningApi) -> None:
    """Broken JSON, an unknown session, a big body, an unknown route and a wrong method."""
    status, error = await post(api, None, raw=b'{"message": "hi"')
    assert (status, error["code"]) == (400, "VALIDATION_ERROR")
    status, error = await post(api, {"message": "hi", "sessionId": str(uuid.uuid4())})
    assert (status, error["code"]) == (404, "SESSION_NOT_FOUND")
    readers = DocumentReaders(api.settings.reader_config())  # never reads: no process
    intake = Intake(api.settings.intake_config(), None, readers)  # the harness runtime's
    limit = chat_body_limit(api.settings.api_max_body_bytes, intake)
    huge = {"message": "x" * (limit + 10)}
    status, error = await post(api, huge)
    assert (status, error["code"]) == (413, "PAYLOAD_TOO_LARGE")
    response = await api.client.get("/api/nothing-here")
    assert (response.status, (await response.json())["code"]) == (404, "NOT_FOUND")
    response = await api.client.get("/api/chat")
    assert (response.status, (await response.json())["code"]) == (405, "METHOD_NOT_ALLOWED")
    assert response.headers["Allow"] == "POST"


async def test_unknown_fields_are_ignored(api: RunningApi) -> None:
    """A field the contract does not know (e.g. a client's `temperature`) is not an error."""
    status, body = await post(api, {"message": "hi", "temperature": 0.2, "stream": False})
    assert (status, body["isComplete"]) == (200, True)


@pytest.mark.parametrize(
    ("model_status", "code", "status"),
    [
        (400, "MODEL_ERROR", 502),
        (500, "MODEL_UNAVAILABLE", 503),
        (429, "MODEL_UNAVAILABLE", 503),
        (None, "MODEL_TIMEOUT", 504),  # the model never answers
    ],
)
async def test_model_failure_does_not_consume_the_round(
    tmp_path: Path,
    model_server: FakeModelServer,
    model_status: int | None,
    code: str,
    status: int,
) -> None:
    """A failed round 1 names its session; retrying it gives round 1/2, then round 2/2."""
    settings = api_settings(tmp_path / "a.sqlite3", model_server.base_url)
    async with running_api(settings) as api:
        if model_status is None:  # held forever: only this call meets a short deadline
            model_server.enqueue("too slow", hold=asyncio.Event())
            with api.first_text_deadline(0.05):
                got, error = await post(api, {"message": "Plan my week", "maxRounds": 2})
        else:
            model_server.enqueue(status=model_status)
            got, error = await post(api, {"message": "Plan my week", "maxRounds": 2})
        assert (got, error["code"]) == (status, code)
        session = error["sessionId"]
        model_server.enqueue("Which days are free?")
        got, body = await post(api, {"message": "Plan my week", "sessionId": session})
        assert (got, body["round"], body["maxRounds"], body["isComplete"]) == (200, 1, 2, False)
        got, body = await post(api, {"message": "Mon and Wed", "sessionId": session})
        assert (got, body["round"], body["isComplete"]) == (200, 2, True)
        stored = await api.store.get(session)
        assert stored is not None
        assert [m.text for m in stored.messages if m.role is Role.USER] == [
            "Plan my week", "Mon and Wed"]  # fmt: skip


async def test_concurrent_requests_on_one_session_are_serialized(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Three simultaneous continuations each take one round; no message is lost or doubled."""
    _, first = await post(api, {"message": "Start", "maxRounds": 4})
    session = first["sessionId"]
    model_server.latency = 0.05
    results = await asyncio.gather(
        *(post(api, {"message": text, "sessionId": session}) for text in ("A", "B", "C"))
    )
    assert [status for status, _ in results] == [200, 200, 200]
    assert sorted(body["round"] for _, body in results) == [2, 3, 4]
    assert [body["isComplete"] for _, body in sorted(results, key=lambda r: r[1]["round"])] == [
        False, False, True]  # fmt: skip
    stored = await api.store.get(session)
    assert stored is not None and stored.current_round == 4
    assert [m.role for m in stored.messages] == [Role.USER, Role.ASSISTANT] * 4
    users = [m.text for m in stored.messages if m.role is Role.USER]
    assert users[0] == "Start" and sorted(users[1:]) == ["A", "B", "C"]
    for _, body in results:  # each reply answers the message it was sent with
        assert body["content"].startswith("Reply to: ")


async def test_max_rounds_on_a_continuing_request_changes_the_limit(api: RunningApi) -> None:
    """Equal keeps the limit, a higher one extends it, one already reached ends the dialog now."""
    _, first = await post(api, {"message": "Start", "maxRounds": 3})
    session = first["sessionId"]
    _, body = await post(api, {"message": "one", "maxRounds": 3, "sessionId": session})
    assert (body["round"], body["maxRounds"]) == (2, 3)
    _, body = await post(api, {"message": "two", "maxRounds": 5, "sessionId": session})
    assert (body["round"], body["maxRounds"], body["isComplete"]) == (3, 5, False)
    status, error = await post(api, {"message": "x", "maxRounds": 11, "sessionId": session})
    assert (status, error["code"]) == (400, "MAX_ROUNDS_EXCEEDED")
    status, error = await post(api, {"message": "x", "maxRounds": 0, "sessionId": session})
    assert (status, error["code"]) == (400, "INVALID_MAX_ROUNDS")
    _, body = await post(api, {"message": "enough", "maxRounds": 2, "sessionId": session})
    assert (body["round"], body["maxRounds"], body["isComplete"]) == (4, 4, True)


async def test_json_output_is_continued_until_it_parses(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A JSON final answer cut by the token limit is continued and arrives as valid JSON."""
    model_server.enqueue('{"plan": ["squats", "rows"], "no', finish_reason="length")
    model_server.enqueue('te": "rest on Sunday"}')
    schema = {"type": "object", "properties": {"plan": {"type": "array"}}}
    status, body = await post(
        api, {"message": "A plan, please", "outputFormat": "json", "outputSchema": schema}
    )
    assert (status, body["isComplete"]) == (200, True)
    assert json.loads(body["content"]) == {"plan": ["squats", "rows"], "note": "rest on Sunday"}
    assert model_server.requests[0]["response_format"]["json_schema"]["schema"] == schema
    assert '"plan"' in model_server.requests[0]["messages"][0]["content"]  # the schema is shown
    assert "response_format" not in model_server.requests[1]  # a continuation is plain text
    assert len(model_server.requests) == 2
