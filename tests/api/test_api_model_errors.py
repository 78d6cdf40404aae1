"""What the HTTP API and the operator's log say about model errors no retry can fix, and what
the server logs per request: a real server (start_web_server), the real openai SDK against
the fake model server, real SQLite."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from api.app import start_web_server
from api.chat import did_not_happen
from app.runtime import check_model_endpoint, open_runtime
from app.settings import Settings
from core.domain.errors import ModelError, ModelErrorKind
from fakes.model_server import CONTEXT_ERRORS, FakeModelServer
from i18n.document_labels import DOCUMENT_LANGUAGES
from tests.api_harness import RunningApi, api_settings


async def chat(api: RunningApi, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = await api.client.post("/api/chat", json=body)
    return response.status, await response.json()


async def test_a_conversation_over_the_context_is_413_context_too_long(
    api: RunningApi, model_server: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A context overflow is 413 CONTEXT_TOO_LONG naming the session, with advice a client can
    act on (no "try again"); the log names HISTORY_BUDGET_CHARS and the context size."""
    message, code = CONTEXT_ERRORS["openai"]
    model_server.enqueue(message, status=400, error_code=code)

    status, body = await chat(api, {"message": "A very long question"})

    assert status == 413
    assert body["code"] == "CONTEXT_TOO_LONG" and body["sessionId"]
    assert "try again" not in body["error"] and "new session" in body["error"]
    [line] = [r.getMessage() for r in caplog.records if "HISTORY_BUDGET_CHARS" in r.getMessage()]
    assert "8192 tokens" in line and body["sessionId"] in line


async def test_a_stream_over_the_context_ends_in_a_context_error_event(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """On the stream, a model stream that ends before any text is an `error` event
    CONTEXT_TOO_LONG with status 413."""
    model_server.enqueue("", stop_early=True)

    response = await api.client.post("/api/chat/stream", json={"message": "Long question"})
    text = await response.text()

    assert "event: error" in text and '"code": "CONTEXT_TOO_LONG"' in text
    assert '"status": 413' in text


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_a_misconfigured_model_is_502_model_misconfigured(
    api: RunningApi, model_server: FakeModelServer, status: int
) -> None:
    """401/403/404 from the model are MODEL_MISCONFIGURED (502): no retry helps, the operator
    has to fix a setting."""
    model_server.enqueue("nope", status=status)

    code, body = await chat(api, {"message": "Hello"})

    assert code == 502
    assert body["code"] == "MODEL_MISCONFIGURED" and body["sessionId"]
    assert "try again" not in body["error"]


async def test_estimated_tokens_are_counted_under_their_own_label(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Tokens the provider reported and tokens estimated for one that reports none are
    separate series of consult_model_tokens_total."""
    model_server.enqueue("Four.", usage={"prompt_tokens": 11, "completion_tokens": 3})
    model_server.enqueue("Six, as far as I can tell.", no_usage=True)
    await chat(api, {"message": "2+2?"})
    await chat(api, {"message": "3+3?"})

    text = await (await api.client.get("/metrics")).text()

    assert 'consult_model_tokens_total{source="reported",type="prompt"} 11.0' in text
    assert 'consult_model_tokens_total{source="reported",type="completion"} 3.0' in text
    assert 'consult_model_tokens_total{source="estimated",type="completion"} 7.0' in text


async def test_the_stored_reply_keeps_its_estimated_usage(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """The store keeps whether a reply's token counts were estimated."""
    model_server.enqueue("Six.", no_usage=True)
    model_server.enqueue("Seven.", usage={"prompt_tokens": 5, "completion_tokens": 2})
    _, first = await chat(api, {"message": "3+3?"})
    _, second = await chat(api, {"message": "3+4?"})

    estimated = await api.store.get(first["sessionId"])
    reported = await api.store.get(second["sessionId"])

    assert estimated is not None and reported is not None
    assert estimated.messages[-1].usage is not None and estimated.messages[-1].usage.estimated
    assert reported.messages[-1].usage is not None
    assert not reported.messages[-1].usage.estimated


# -- the process as started: access log, start-up check ------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def serve_once(settings: Settings, path: str) -> int:
    """Start the API as `python -m api` does, request `path` once, stop; return the status."""
    async with open_runtime(settings) as runtime:
        runner = await start_web_server(
            settings.api_config(),
            runtime.engine,
            document_languages=DOCUMENT_LANGUAGES,
            store=runtime.store,
            metrics=runtime.metrics,
        )
        try:
            url = f"http://127.0.0.1:{settings.api_port}{path}"
            async with aiohttp.ClientSession() as session, session.get(url) as response:
                await response.read()
                return response.status
        finally:
            await runner.cleanup()


def access_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "api.access"]


async def test_each_request_is_one_access_log_line_without_its_query(
    tmp_path: Path, model_server: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    """One line per request: method, path (no query string), status and milliseconds."""
    caplog.set_level(logging.INFO)
    settings = api_settings(tmp_path / "a.sqlite3", model_server.base_url, api_port=free_port())

    status = await serve_once(settings, "/healthz?token=secret-in-query")

    [line] = access_lines(caplog)
    assert line.startswith(f"GET /healthz {status} ") and line.endswith(" ms")
    assert "secret-in-query" not in line and "?" not in line


async def test_the_access_log_can_be_turned_off(
    tmp_path: Path, model_server: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    """API_ACCESS_LOG=false: no access lines."""
    caplog.set_level(logging.INFO)
    settings = api_settings(
        tmp_path / "a.sqlite3", model_server.base_url, api_port=free_port(), api_access_log=False
    )

    await serve_once(settings, "/healthz")

    assert access_lines(caplog) == []


async def start_up_warnings(settings: Settings, caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.set_level(logging.INFO)
    async with open_runtime(settings) as runtime:
        await check_model_endpoint(runtime)
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    ("case", "named"),
    [("base URL without /v1", ("OPENAI_BASE_URL", "/v1")), ("unlisted model", ("LLM_MODEL",))],
)
async def test_start_up_warns_once_of_a_setting_that_looks_wrong(
    tmp_path: Path,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    case: str,
    named: tuple[str, ...],
) -> None:
    """A base URL without its /v1, or an LLM_MODEL the server does not list, is one WARNING
    naming the setting; start-up goes on."""
    model_server.models = ["gpt-4o-mini"]
    base, model = model_server.base_url, "gpt-4o-mimi"
    if case == "base URL without /v1":
        base, model = base.removesuffix("/v1"), "gpt-4o-mini"
    settings = api_settings(tmp_path / "a.sqlite3", base, llm_model=model)

    [warning] = await start_up_warnings(settings, caplog)

    assert all(name in warning for name in named)


async def test_start_up_is_quiet_when_the_endpoint_looks_right(
    tmp_path: Path, model_server: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A listed model, or a provider without /models under a /v1 base: no warning."""
    model_server.models = ["test-model"]
    settings = api_settings(tmp_path / "a.sqlite3", model_server.base_url)

    assert await start_up_warnings(settings, caplog) == []


@pytest.mark.parametrize("kind", list(ModelErrorKind))
def test_every_model_failure_has_a_stable_code(kind: ModelErrorKind) -> None:
    error = did_not_happen(ModelError(kind, "detail for the log"), "s-1")
    assert error.code.isupper() and error.status >= 400
    assert error.body()["sessionId"] == "s-1" and "detail for the log" not in error.message
