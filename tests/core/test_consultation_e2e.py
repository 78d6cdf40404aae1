"""A whole consultation through the real openai SDK, the fake model server and SQLite."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.domain.asking import UserMessage
from core.domain.errors import ModelError
from core.llm.llm import OpenAICompleter
from core.prompting.prompts import PromptContext, PromptLibrary, build_system_prompt
from core.turns.engine import Engine
from fakes.model_server import FakeModelServer
from storage.sqlite.store import SqliteStore
from tests.service_harness import make_service

REQUEST = 'Help me choose weights for "hammer curls" and the butterfly — how many reps?'


@pytest.fixture
async def service(store: SqliteStore, model_server: FakeModelServer) -> AsyncIterator[Engine]:
    """The SDK retrying twice, as in production; a model and budget of their own."""
    completer = OpenAICompleter(
        api_key="test", base_url=model_server.base_url, timeout=10, max_retries=2
    )
    yield make_service(store, completer, model="sonar", max_tokens=800)
    await completer.close()


async def test_round_three_request_carries_everything(
    service: Engine, model_server: FakeModelServer
) -> None:
    """Round 3 of 3 sends the final-round system prompt and the whole conversation, alternating."""
    model_server.enqueue("1. Which exercises today?\n2. Your experience?")
    model_server.enqueue("How many months have you trained, and any injuries?")
    model_server.enqueue("## Your plan\n- Hammer curls: 3×12 at 8 kg")
    chat = "tg:100"
    await service.turns.ask(UserMessage(chat, REQUEST))
    await service.turns.ask(UserMessage(chat, "Hammer curls and butterfly today"))
    final = await service.turns.ask(UserMessage(chat, "Beginner, 2 months, no injuries"))

    assert final.is_final and final.is_complete and final.round == 3
    assert final.text == "## Your plan\n- Hammer curls: 3×12 at 8 kg"
    sent = model_server.requests[-1]
    expected_system = build_system_prompt(
        PromptLibrary(),
        PromptContext(
            round=3,
            max_rounds=3,
            is_final=True,
            final_requested=False,
            initial_request=REQUEST,
            role="expert",
            custom_system_prompt=None,
            is_group=False,
            brief=True,
        ),
    )
    assert sent["messages"] == [
        {"role": "system", "content": expected_system},
        {"role": "user", "content": REQUEST},
        {"role": "assistant", "content": "1. Which exercises today?\n2. Your experience?"},
        {"role": "user", "content": "Hammer curls and butterfly today"},
        {"role": "assistant", "content": "How many months have you trained, and any injuries?"},
        {"role": "user", "content": "Beginner, 2 months, no injuries"},
    ]
    assert "last round of the consultation (round 3 of 3)" in expected_system
    assert f"\n> {REQUEST}\n" in expected_system
    assert "What I took into account" in expected_system
    assert sent["model"] == "sonar" and sent["max_tokens"] == 800 and sent["stream"] is True


async def test_model_outage_then_recovery_keeps_the_round(
    service: Engine, model_server: FakeModelServer
) -> None:
    """Three 500s (the call and the SDK's two retries) fail the turn as "unavailable"; /retry
    later answers round 1 with the message, which the model is sent once."""
    for _ in range(3):
        model_server.enqueue(status=500, headers={"retry-after-ms": "1"})
    with pytest.raises(ModelError, match="unavailable"):
        await service.turns.ask(UserMessage("tg:5", "Question"))
    model_server.enqueue("Clarifying question?")
    reply = await service.turns.retry("tg:5")
    assert reply.round == 1
    assert [m["content"] for m in model_server.requests[-1]["messages"][1:]] == ["Question"]
