"""An API session's `model` is one of LLM_MODELS: the chosen one answers every call of the
session, another is refused before anything is stored, and the OpenAPI document lists the
allowed ones."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from fakes.model_server import FakeModelServer
from tests.api_harness import RunningApi

pytestmark = pytest.mark.api_settings(llm_models=("test-model", "sonar", "sonar-pro"))


async def chat(api: RunningApi, body: Any) -> tuple[int, Any]:
    response = await api.client.post("/api/chat", json=body)
    return response.status, await response.json()


def consultations(api: RunningApi) -> int:
    with sqlite3.connect(api.settings.db_path) as db:
        return int(db.execute("SELECT COUNT(*) FROM consultations").fetchone()[0])


async def test_an_allowed_model_answers_every_round_of_its_session(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """`model: "sonar-pro"` names every request of the session, and the reply says so."""
    status, first = await chat(
        api, {"message": "Plan a trip", "model": "sonar-pro", "maxRounds": 2}
    )
    assert status == 200
    status, second = await chat(api, {"message": "By train", "sessionId": first["sessionId"]})
    assert status == 200 and second["isComplete"]
    assert [r["model"] for r in model_server.requests] == ["sonar-pro", "sonar-pro"]
    status, _ = await chat(api, {"message": "Another"})
    assert status == 200
    assert model_server.requests[-1]["model"] == "test-model"  # LLM_MODEL without a choice


@pytest.mark.parametrize("model", ["gpt-4-32k", "SONAR", "sonar ", "x" * 200])
async def test_a_model_outside_llm_models_is_refused_naming_the_allowed_ones(
    api: RunningApi, model_server: FakeModelServer, model: str
) -> None:
    """400 VALIDATION_ERROR naming the allowed models; no session, no model call."""
    status, error = await chat(api, {"message": "hi", "model": model})
    assert (status, error["code"]) == (400, "VALIDATION_ERROR")
    assert error["error"].startswith("model: ")
    assert "sonar, sonar-pro, test-model" in error["error"]
    assert model_server.requests == []
    assert consultations(api) == 0


async def test_the_openapi_document_lists_the_allowed_models(api: RunningApi) -> None:
    """GET /api/openapi.json gives `model` as an enum of LLM_MODELS."""
    document = await (await api.client.get("/api/openapi.json")).json()
    model = document["components"]["schemas"]["ChatRequest"]["properties"]["model"]
    assert model["anyOf"][0]["enum"] == ["sonar", "sonar-pro", "test-model"]
    assert "LLM_MODELS" in model.get("description", "")
