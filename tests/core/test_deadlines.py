"""Deadlines on a whole model call, end to end: a provider that only sends keep-alives or
streams forever ends in a timeout the user can act on, the chat is free again and the
round is not used up (LLM_FIRST_TOKEN_TIMEOUT_SECONDS, LLM_TOTAL_TIMEOUT_SECONDS)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from app.model_clients import ModelClients
from app.runtime import BOT_MODEL
from core.domain.errors import ModelError, ModelErrorKind
from core.domain.ports import CompletionRequest
from core.llm.deadline import DeadlineCompleter
from core.llm.llm import OpenAICompleter
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from telemetry.metrics import MeteredCompleter, Metrics
from tests.api_harness import api_settings, running_api
from tests.bot_harness import ask_private, conversation, started_bot
from tests.wires import wire_for

USER = 951
REQUEST = CompletionRequest(messages=[{"role": "user", "content": "Hi"}], model="test-model")


@pytest.fixture
def built_deadlines(monkeypatch: pytest.MonkeyPatch) -> list[DeadlineCompleter]:
    """Every `DeadlineCompleter` built during the test (the bot's runtime builds one)."""
    built: list[DeadlineCompleter] = []
    original = DeadlineCompleter.__init__

    def record(self: DeadlineCompleter, *args: object, **kwargs: float) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        built.append(self)

    monkeypatch.setattr(DeadlineCompleter, "__init__", record)
    return built


@contextlib.contextmanager
def deadlines(completer: DeadlineCompleter, first: float, total: float) -> Iterator[None]:
    """Short deadlines within the block only, for the one call meant to meet them: calls
    meant to succeed run outside it, so a loaded machine cannot make them time out."""
    before = (completer.first_token_seconds, completer.total_seconds)
    completer.first_token_seconds, completer.total_seconds = first, total
    try:
        yield
    finally:
        completer.first_token_seconds, completer.total_seconds = before


@pytest.fixture(params=["httpx", "aiohttp"])
async def sdk(
    request: pytest.FixtureRequest, model_server: FakeModelServer
) -> AsyncIterator[OpenAICompleter]:
    """The completer on both paths (the wire, the SDK), with a read timeout the misbehaving
    streams never hit."""
    completer = OpenAICompleter(
        api_key="test-key",
        base_url=model_server.base_url,
        timeout=10,
        max_retries=0,
        wire=wire_for(request.param, 10),
    )
    yield completer
    await completer.close()


async def test_keepalive_only_stream_fails_at_the_first_token_deadline(
    model_server: FakeModelServer, sdk: OpenAICompleter
) -> None:
    """Comments keep every read alive; no text by the first-token deadline is a TIMEOUT."""
    model_server.enqueue(keepalive_only=0.05)
    completer = DeadlineCompleter(sdk, first_token_seconds=0.3, total_seconds=30)
    with pytest.raises(ModelError) as caught:
        await completer.complete(REQUEST)
    assert caught.value.kind is ModelErrorKind.TIMEOUT
    assert "no text within 0.3 s" in caught.value.detail


async def test_endless_stream_fails_at_the_total_deadline(
    model_server: FakeModelServer, sdk: OpenAICompleter
) -> None:
    """Text that never ends passes the first-token deadline but not the total one."""
    model_server.enqueue("abc", endless=True, chunk_size=4, chunk_delay=0.01)
    # No separate first-token deadline: however late the first text, only the total can end it.
    completer = DeadlineCompleter(sdk, first_token_seconds=1.5, total_seconds=1.5)
    pieces: list[str] = []

    async def on_delta(piece: str) -> None:
        pieces.append(piece)

    with pytest.raises(ModelError) as caught:
        await completer.complete(REQUEST, on_delta)
    assert caught.value.kind is ModelErrorKind.TIMEOUT
    assert "no complete answer within 1.5 s" in caught.value.detail
    assert pieces and set(pieces) == {"abc"}


async def test_first_text_lifts_the_first_token_deadline(
    model_server: FakeModelServer, sdk: OpenAICompleter
) -> None:
    """A reply whose first text comes in time may take longer than the first-token deadline."""
    # First text after 0.125 s, the whole reply after 2.5 s: past the 2 s first-token deadline.
    model_server.enqueue("abcdefghijklmnopqrst", chunk_size=1, chunk_delay=0.125)
    completer = DeadlineCompleter(sdk, first_token_seconds=2.0, total_seconds=30)
    completion = await completer.complete(REQUEST)
    assert completion.text == "abcdefghijklmnopqrst"
    assert completion.finish_reason == "stop"


async def test_deadlines_come_from_settings(tmp_path: Path, sdk: OpenAICompleter) -> None:
    """The two settings reach the completer; a first-token deadline above the total is capped."""
    settings = api_settings(
        tmp_path / "db.sqlite3",
        "http://127.0.0.1:1/v1",
        llm_first_token_timeout_seconds=7,
        llm_total_timeout_seconds=9,
    )
    clients = ModelClients([settings.model_endpoint()], Metrics())
    try:
        metered = clients[BOT_MODEL]
        assert isinstance(metered, MeteredCompleter)
        completer = metered.inner
        assert isinstance(completer, DeadlineCompleter)
        assert (completer.first_token_seconds, completer.total_seconds) == (7, 9)
        assert completer.inner is clients.raw(BOT_MODEL)
    finally:
        await clients.close()
    capped = DeadlineCompleter(sdk, first_token_seconds=50, total_seconds=5)
    assert (capped.first_token_seconds, capped.total_seconds) == (5, 5)
    with pytest.raises(ValueError, match="positive"):
        DeadlineCompleter(sdk, first_token_seconds=0, total_seconds=5)


async def test_api_turn_on_a_silent_model_is_a_timeout_that_keeps_the_round(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """Keep-alives only: 504 MODEL_TIMEOUT naming the session; a retry answers round 1."""
    settings = api_settings(tmp_path / "api.sqlite3", model_server.base_url)
    model_server.enqueue(keepalive_only=0.05)
    async with running_api(settings) as api:
        headers = {"Content-Type": "application/json"}
        body = {"message": "Plan my week", "maxRounds": 2}
        with api.first_text_deadline(0.3):
            response = await api.client.post("/api/chat", data=json.dumps(body), headers=headers)
        failed = await response.json()
        assert (response.status, failed["code"]) == (504, "MODEL_TIMEOUT")
        session = failed["sessionId"]

        again = {"message": "Plan my week", "sessionId": session}
        response = await api.client.post("/api/chat", data=json.dumps(again), headers=headers)
        answered = await response.json()
        assert response.status == 200
        assert (answered["round"], answered["maxRounds"]) == (1, 2)
        assert conversation(model_server.requests[-1]) == ["Plan my week"]


async def test_bot_turn_on_an_endless_stream_times_out_and_frees_the_chat(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    built_deadlines: list[DeadlineCompleter],
) -> None:
    """Text forever: the total deadline ends the call, the user is told, the chat answers again."""
    model_server.enqueue("abc", endless=True, chunk_size=4, chunk_delay=0.01)
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        [runtime_deadline] = built_deadlines
        with deadlines(runtime_deadline, first=1, total=1):
            [error] = await ask_private(bot, USER, "Plan my week")
        assert error.startswith("⚠️ The model is not answering right now")
        assert "it took too long" in error and "/retry" in error

        [status] = await ask_private(bot, USER, "/status")
        assert "0 of 3 rounds answered" in status

        [reply] = await ask_private(bot, USER, "/retry")
        assert reply == "Reply to: Plan my week\n\nRound 1 of 3"
        assert conversation(model_server.requests[-1]) == ["Plan my week"]
