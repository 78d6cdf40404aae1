"""Quotas through the HTTP API: a bearer token past API_DAILY_TOKEN_LIMIT gets 429
QUOTA_EXCEEDED with Retry-After (seconds to the next UTC midnight) and the API's error
body, nothing stored; a session under way gets its final answer instead; a `userId`'s
person limits apply too; the OpenAPI document describes it all and the bodies match it.

The real aiohttp app runs against the fake model server (tests/api_harness.py)."""

from __future__ import annotations

import base64
import json
import math
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from core.domain.quotas import next_day
from fakes.model_server import FakeModelServer
from fakes.transcription_server import (  # noqa: F401 - a fixture
    FakeTranscriptionServer,
    transcription_server,
)
from tests.api_harness import RunningApi, api_settings, running_api

TOKEN = "quota-token"
HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}


def spend(model_server: FakeModelServer, tokens: int, text: str = "Answer.") -> None:
    model_server.enqueue(text, usage={"prompt_tokens": tokens - 1, "completion_tokens": 1})


async def chat(api: RunningApi, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    response = await api.client.post("/api/chat", data=json.dumps(body), headers=HEADERS)
    return response.status, dict(response.headers), await response.json()


def check(document: dict[str, Any], status: int, body: Any) -> None:
    schema = document["paths"]["/api/chat"]["post"]["responses"][str(status)]["content"][
        "application/json"]["schema"]  # fmt: skip
    Draft202012Validator({**schema, "components": document["components"]}).validate(body)


@pytest.mark.api_settings(api_token=TOKEN, api_daily_token_limit=100)
async def test_a_token_over_its_daily_limit_gets_429_with_retry_after(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """99 tokens used: one more session is answered. At 100 a session under way gets its
    final answer (`quotaReached`), and a new one is 429 QUOTA_EXCEEDED, Retry-After the
    seconds to the next UTC midnight, nothing opened and no model call; both bodies
    match the OpenAPI document."""
    document = await (await api.client.get("/api/openapi.json", headers=HEADERS)).json()
    spend(model_server, 99, "Which load?")
    status, _, first = await chat(api, {"message": "Pick a database", "maxRounds": 3})
    assert status == 200 and not first["isComplete"]
    spend(model_server, 1, "Use PostgreSQL.")
    status, _, final = await chat(api, {"message": "Heavy", "sessionId": first["sessionId"]})
    assert status == 200, final
    assert "quotaReached" not in final and not final["isComplete"]  # 99 < 100 when checked
    spend(model_server, 1, "Done.")
    status, _, last = await chat(api, {"message": "More", "sessionId": first["sessionId"]})
    assert status == 200 and last["isComplete"] and last["quotaReached"] == "api_daily_tokens"
    check(document, 200, last)

    calls = len(model_server.requests)
    before = time.time()
    status, headers, refused = await chat(api, {"message": "Another", "userId": "u-1"})
    after = time.time()
    assert status == 429
    assert refused["code"] == "QUOTA_EXCEEDED" and refused["quota"] == "api_daily_tokens"
    assert "API_DAILY_TOKEN_LIMIT" in refused["error"]
    resets = next_day(before)
    assert refused["resetsAt"] == datetime.fromtimestamp(resets, UTC).isoformat()[:19] + "Z"
    assert math.ceil(resets - after) <= int(headers["Retry-After"]) <= math.ceil(resets - before)
    check(document, 429, refused)
    assert len(model_server.requests) == calls
    assert "QUOTA_EXCEEDED" in json.dumps(document["paths"]["/api/chat"]["post"]["responses"])
    stream = await api.client.post(
        "/api/chat/stream", data=json.dumps({"message": "Another"}), headers=HEADERS
    )
    assert stream.status == 429 and (await stream.json())["code"] == "QUOTA_EXCEEDED"
    assert "Retry-After" in stream.headers


@pytest.mark.api_settings(api_token=TOKEN, user_daily_consultation_limit=1)
async def test_a_user_ids_person_limits_apply_to_its_sessions(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """`userId` is a person (`api:<userId>`): past its consultations for the day a new
    session is refused with the person limit named; another userId, or none, is not."""
    spend(model_server, 5)
    assert (await chat(api, {"message": "First", "userId": "u-1"}))[0] == 200
    status, headers, refused = await chat(api, {"message": "Second", "userId": "u-1"})
    assert status == 429 and refused["quota"] == "user_daily_consultations"
    assert int(headers["Retry-After"]) >= 1
    for body in ({"message": "Second", "userId": "u-2"}, {"message": "Third"}):
        spend(model_server, 5)
        assert (await chat(api, body))[0] == 200


@pytest.mark.api_settings(
    api_token=TOKEN, user_daily_consultation_limit=1, quota_exempt_user_ids="api:u-1"
)
async def test_an_api_user_in_quota_exempt_user_ids_has_no_person_limits(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """QUOTA_EXEMPT_USER_IDS=api:u-1 exempts that `userId` from the person limits;
    another userId is still limited."""
    for body in ({"userId": "u-1"}, {"userId": "u-1"}, {"userId": "u-2"}):
        spend(model_server, 5)
        assert (await chat(api, {**body, "message": "A question"}))[0] == 200
    status, _, refused = await chat(api, {"message": "Again", "userId": "u-2"})
    assert status == 429 and refused["quota"] == "user_daily_consultations"
    assert (await api.engine.quotas.of_person("api:u-1")).limits.exempt


async def test_a_refused_voice_note_is_not_transcribed(
    tmp_path: Path,
    model_server: FakeModelServer,
    transcription_server: FakeTranscriptionServer,  # noqa: F811
) -> None:
    """Past the token's limit a new session with a voice note is 429 before the note is
    transcribed (a transcription costs too)."""
    settings = api_settings(
        tmp_path / "api.sqlite3",
        model_server.base_url,
        api_daily_token_limit=10,
        transcription_model="whisper-1",
        transcription_base_url=transcription_server.base_url,
    )
    audio = base64.b64encode(b"OggS" + b"\x00" * 400).decode("ascii")
    voice = {"name": "voice.ogg", "data": audio, "mimeType": "audio/ogg"}
    async with running_api(settings) as api:
        spend(model_server, 10)
        first = await api.client.post("/api/chat", json={"message": "Pick a database"})
        assert first.status == 200
        refused = await api.client.post("/api/chat", json={"attachments": [voice]})
        assert refused.status == 429 and (await refused.json())["code"] == "QUOTA_EXCEEDED"
    assert transcription_server.calls == []
