"""A chat's model in the engine: chosen among LLM_MODELS, used from the next model call by
every kind of call (a round, the final answer, a follow-up, the memory extraction), and
LLM_MODEL again once the operator removes it. Real SQLite, the real openai SDK against
the fake model server."""

from __future__ import annotations

import json

import pytest

from core.domain.asking import UserMessage
from core.domain.consultation import ChatSettings
from core.domain.errors import UnknownModel
from core.domain.facts import memory_scope
from fakes.model_server import FakeModelServer
from storage.sqlite.store import SqliteStore
from tests.service_harness import MakeEngine

KEY = "tg:7"
MODELS = ("test-model", "sonar")


async def test_an_unknown_model_is_refused_and_nothing_is_stored(
    engine: MakeEngine, store: SqliteStore
) -> None:
    """Only a name LLM_MODELS lists is taken (exactly: no case folding, no trimming)."""
    service = engine(models=MODELS)
    for name in ("gpt-4-32k", "SONAR", " sonar", ""):
        with pytest.raises(UnknownModel):
            await service.settings.set_model(KEY, name)
    assert await store.load_chat_settings(KEY) == ChatSettings()
    assert (await service.settings.chat_model(KEY)).model == "test-model"


async def test_the_chosen_model_answers_every_call_from_the_next_one(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """Chosen after the first round, it names the final answer's request, a follow-up's
    and the memory extraction's; /status reports it."""
    service = engine(models=MODELS, memory_enabled=True)
    await service.settings.set_max_rounds(KEY, 2)
    model.enqueue("Which database do you use now?")
    await service.turns.ask(
        UserMessage(KEY, "How do I scale my app?", memory=memory_scope(KEY, KEY))
    )
    assert (await service.turns.status(KEY)).model == "test-model"

    await service.settings.set_model(KEY, "sonar")
    assert (await service.turns.status(KEY)).model == "sonar"
    model.enqueue("## Plan\nMove to PostgreSQL.")
    final = await service.turns.ask(UserMessage(KEY, "SQLite"))
    assert final.is_complete
    model.enqueue("Use connection pooling.")
    await service.turns.follow_up(KEY, "What about connections?")
    model.enqueue(json.dumps({"facts": ["Uses SQLite"]}))
    await service.memories.remember(final.consultation_id)

    assert [r["model"] for r in model.requests] == ["test-model", "sonar", "sonar", "sonar"]
    assert final.model == "sonar"


async def test_a_model_the_operator_removed_falls_back_to_llm_model(
    engine: MakeEngine, model: FakeModelServer, store: SqliteStore
) -> None:
    """A stored choice LLM_MODELS no longer names is never called: LLM_MODEL answers, and
    `chat_model` names the removed one so the chat can be told."""
    await engine(models=MODELS).settings.set_model(KEY, "sonar")
    model.enqueue("A question back?")
    await engine(models=MODELS).turns.ask(UserMessage(KEY, "Started with sonar"))
    service = engine(models=("test-model",))
    chosen = await service.settings.chat_model(KEY)
    assert (chosen.model, chosen.removed) == ("test-model", "sonar")
    assert (await service.turns.status(KEY)).model == "test-model"
    model.enqueue("Another question?")
    await service.turns.ask(UserMessage(KEY, "Continued after the change"))
    await service.turns.ask(UserMessage("tg:8", "A chat that never chose"))
    assert [r["model"] for r in model.requests] == ["sonar", "test-model", "test-model"]
    assert (await store.load_chat_settings(KEY)).model == "sonar"  # kept if it comes back
