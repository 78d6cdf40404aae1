"""Input, cost and rate limits of the HTTP API, and refusing to serve it openly by mistake."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.app import build_web_app
from app.runtime import open_runtime
from core.domain.consultation import Role
from core.primitives.keyed_lock import KeyedLock
from fakes.bot_api import TOKEN as BOT_TOKEN
from fakes.model_server import FakeModelServer
from i18n.document_labels import DOCUMENT_LANGUAGES
from tests.api_harness import RunningApi, api_settings, running_api

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.api_settings(
    max_input_chars=100,
    llm_models=("test-model", "sonar"),
    api_max_tokens_limit=500,
    api_rate_limit_per_minute=0,
)


async def chat(api: RunningApi, body: Any) -> tuple[int, Any]:
    response = await api.client.post("/api/chat", json=body)
    return response.status, await response.json()


async def test_a_message_over_the_input_limit_is_refused_and_not_stored(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """MAX_INPUT_CHARS applies to API messages: a clear error naming it; nothing stored."""
    status, error = await chat(api, {"message": "x" * 101})
    assert (status, error["code"]) == (400, "VALIDATION_ERROR")
    assert "100" in error["error"] and "message" in error["error"]
    status, answer = await chat(api, {"message": "x" * 100, "maxRounds": 2})
    assert status == 200
    status, error = await chat(api, {"message": "y" * 5000, "sessionId": answer["sessionId"]})
    assert (status, error["code"]) == (400, "VALIDATION_ERROR")
    stored = await api.store.get(answer["sessionId"])
    assert stored is not None
    assert [m.text for m in stored.messages if m.role is Role.USER] == ["x" * 100]
    assert len(model_server.requests) == 1


async def test_system_prompt_and_output_schema_are_bounded_too(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Both go into every model request of the session: MAX_INPUT_CHARS bounds them as well."""
    big_schema = {"type": "object", "description": "y" * 100}
    for body, field in (
        ({"message": "hi", "systemPrompt": "s" * 101}, "systemPrompt"),
        ({"message": "hi", "outputFormat": "json", "outputSchema": "z" * 101}, "outputSchema"),
        ({"message": "hi", "outputFormat": "json", "outputSchema": big_schema}, "outputSchema"),
    ):
        status, error = await chat(api, body)
        assert (status, error["code"]) == (400, "VALIDATION_ERROR")
        assert field in error["error"] and "100" in error["error"]
    assert model_server.requests == []
    status, _ = await chat(api, {"message": "hi", "systemPrompt": "s" * 100})
    assert status == 200


async def test_only_allowed_models_and_token_budgets(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A model outside LLM_MODELS or maxTokens above the cap is refused, named."""
    status, error = await chat(api, {"message": "hi", "model": "gpt-4-32k"})
    assert (status, error["code"]) == (400, "VALIDATION_ERROR")
    assert "sonar" in error["error"] and "test-model" in error["error"]
    status, error = await chat(api, {"message": "hi", "maxTokens": 501})
    assert (status, error["code"]) == (400, "VALIDATION_ERROR")
    assert "500" in error["error"]
    assert model_server.requests == []
    status, _ = await chat(api, {"message": "hi", "model": "sonar", "maxTokens": 500})
    assert status == 200
    assert model_server.requests[0]["model"] == "sonar"


def test_by_default_only_the_configured_model_is_allowed(tmp_path: Path) -> None:
    """Without LLM_MODELS, LLM_MODEL is the one model a client may ask for."""
    settings = api_settings(tmp_path / "x.sqlite3", "http://127.0.0.1:1/v1")
    assert settings.api_models() == frozenset({"test-model"})


async def test_requests_over_the_rate_limit_get_429(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """Per client, API_RATE_LIMIT_PER_MINUTE requests; then 429 RATE_LIMITED with Retry-After."""
    settings = api_settings(
        tmp_path / "api.sqlite3", model_server.base_url, api_rate_limit_per_minute=2
    )
    async with running_api(settings) as api:
        assert (await chat(api, {"message": "one"}))[0] == 200
        assert (await chat(api, {"message": "two"}))[0] == 200
        response = await api.client.post("/api/chat", json={"message": "three"})
        assert response.status == 429
        assert (await response.json())["code"] == "RATE_LIMITED"
        assert 1 <= int(response.headers["Retry-After"]) <= 60
        assert (await api.client.get("/healthz")).status == 200  # probes are never limited
    assert len(model_server.requests) == 2


def test_rate_limiter_is_a_sliding_window_forgets_idle_clients_and_stays_small() -> None:
    """At most N requests in any 60 s per client, on an injected clock (a token bucket let
    about 2N through in the first minute); idle clients are dropped as time passes."""
    from api.ratelimit import RateLimiter

    now = [1000.0]
    limiter = RateLimiter(per_minute=3, clock=lambda: now[0])
    assert [limiter.check("a") for _ in range(4)] == [0.0, 0.0, 0.0, 60.0]
    assert limiter.check("b") == 0.0  # clients are counted apart
    now[0] += 20
    assert limiter.check("a") == 40.0  # the window still holds three: nothing refilled
    now[0] += 40
    assert [limiter.check("a") for _ in range(4)] == [0.0, 0.0, 0.0, 60.0]
    for n in range(10_000):
        limiter.check(f"client-{n}")
    assert len(limiter) == 10_001  # and "a"; "b" was forgotten a window after its request
    now[0] += 61
    limiter.check("late")
    assert len(limiter) == 1  # everyone else is idle for a minute: forgotten
    assert RateLimiter(per_minute=0, clock=lambda: now[0]).check("a") == 0.0


def run_module(tmp_path: Path, module: str, **values: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "k", **values}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", module], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=15,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("module", "host"),
    [("api", "0.0.0.0"), ("api", "::"), ("api", "192.168.1.10"), ("api", "api.example.com"),
     ("bot", "0.0.0.0")],
)  # fmt: skip
def test_an_open_address_without_a_token_refuses_to_start(
    tmp_path: Path, module: str, host: str
) -> None:
    """Listening beyond loopback without API_TOKEN stops the start: one line, exit 2."""
    result = run_module(
        tmp_path, module, API_ENABLED="true", API_HOST=host, TELEGRAM_BOT_TOKEN=BOT_TOKEN,
        TELEGRAM_API_BASE_URL="http://127.0.0.1:9/bot",  # never the real Bot API
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "API_TOKEN" in lines[0] and "API_ALLOW_ANONYMOUS" in lines[0]
    assert host in lines[0]


def test_loopback_or_an_explicit_override_is_allowed() -> None:
    """127.0.0.0/8, ::1 and localhost are fine; API_ALLOW_ANONYMOUS=true accepts the risk."""
    from api.exposure import check_exposure

    for host in ("127.0.0.1", "127.3.2.1", "::1", "localhost", "LOCALHOST"):
        check_exposure(api_settings(Path("x"), "http://x/v1", api_host=host).api_config())
    check_exposure(
        api_settings(Path("x"), "http://x/v1", api_host="0.0.0.0", api_token="t").api_config()
    )
    check_exposure(
        api_settings(
            Path("x"), "http://x/v1", api_host="0.0.0.0", api_allow_anonymous=True
        ).api_config()
    )


async def test_the_rate_limit_counts_each_client_apart(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """Without a token, clients are told apart by address: one's limit does not stop another."""
    settings = api_settings(
        tmp_path / "api.sqlite3", model_server.base_url, api_rate_limit_per_minute=1
    )
    async with running_api(settings) as api:
        assert (await chat(api, {"message": "one"}))[0] == 200
        assert (await chat(api, {"message": "two"}))[0] == 429
        connector = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
        async with aiohttp.ClientSession(connector=connector) as other:
            url = api.client.make_url("/api/chat")
            async with other.post(url, json={"message": "three"}) as response:
                assert response.status == 200


class RecordedLocks:
    """A real in-process `ChatLocks` that records the keys asked for."""

    def __init__(self) -> None:
        self.inner = KeyedLock()
        self.asked: list[str] = []
        self._more = asyncio.Event()

    def hold(self, key: str) -> AbstractAsyncContextManager[None]:
        self.asked.append(key)
        self._more.set()
        return self.inner.hold(key)

    async def asked_for(self, key: str, times: int) -> None:
        while self.asked.count(key) < times:
            self._more.clear()
            await self._more.wait()


async def test_sessions_are_held_through_the_locks_the_server_is_given(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """With `session_locks` (PostgreSQL's in a multi-worker deployment) a session is vetted
    and answered under that lock: while someone else holds it, the request waits."""
    settings = api_settings(tmp_path / "s.sqlite3", model_server.base_url)
    locks = RecordedLocks()
    async with open_runtime(settings, background=False) as runtime:
        app = build_web_app(
            settings.api_config(),
            runtime.engine,
            document_languages=DOCUMENT_LANGUAGES,
            store=runtime.store,
            session_locks=locks,
        )
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            first = await (
                await client.post("/api/chat", json={"message": "one", "maxRounds": 3})
            ).json()
            key = "session:" + first["sessionId"]
            assert locks.asked == [key]
            async with locks.hold(key):
                body = {"message": "two", "sessionId": first["sessionId"]}
                waiting = asyncio.create_task(client.post("/api/chat", json=body))
                await asyncio.wait_for(locks.asked_for(key, 3), 10)
                assert not waiting.done() and len(model_server.requests) == 1
            response = await waiting
            assert response.status == 200, await response.text()
            assert len(model_server.requests) == 2
