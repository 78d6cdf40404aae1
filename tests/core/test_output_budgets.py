"""Each kind of turn has its own output budget (`max_tokens`), as the model server sees it:
clarifying rounds `LLM_QUESTION_MAX_TOKENS`, the final answer `LLM_MAX_TOKENS` per call; an
API session's `maxTokens` is the final answer's budget and caps its clarifying rounds too."""

from __future__ import annotations

import pytest

from app.settings import load_settings
from core.domain.asking import UserMessage
from core.domain.consultation import ModelOptions
from fakes.model_server import FakeModelServer
from tests.service_harness import MakeEngine


def sent_budgets(model: FakeModelServer) -> list[int | None]:
    return [body.get("max_tokens") for body in model.requests]


async def test_default_settings_bound_every_round(
    engine: MakeEngine, model_server: FakeModelServer
) -> None:
    """With no budget set anywhere, clarifying rounds get 400 tokens, the final answer 2048."""
    config = load_settings(_env_file=None).engine_config()
    service = engine(max_tokens=config.max_tokens, question_max_tokens=config.question_max_tokens)

    for text in ("Plan my running", "35, no exercise in years", "5K in 3 months"):
        await service.turns.ask(UserMessage("tg:1", text))

    assert sent_budgets(model_server) == [400, 400, 2048]


async def test_configured_budgets_per_turn(
    engine: MakeEngine, model_server: FakeModelServer
) -> None:
    """LLM_QUESTION_MAX_TOKENS and LLM_MAX_TOKENS are sent as they are set."""
    service = engine(max_tokens=3000, question_max_tokens=150)

    await service.turns.ask(UserMessage("tg:1", "Plan my running"))
    await service.turns.answer_now("tg:1")

    assert sent_budgets(model_server) == [150, 3000]


async def test_continuations_of_an_early_final_answer_get_the_final_budget(
    engine: MakeEngine, model_server: FakeModelServer
) -> None:
    """An early final answer (marked, in a clarifying round) cut by the question budget is a
    final answer: its continuations are asked with the final answer's budget."""
    service = engine(max_tokens=3000, question_max_tokens=150)
    model_server.enqueue("[[FINAL]] Run three times a we", finish_reason="length")
    model_server.enqueue("ek, slowly.")

    reply = await service.turns.ask(UserMessage("tg:1", "Plan my running"))

    assert reply.text == "Run three times a week, slowly." and reply.is_final
    assert sent_budgets(model_server) == [150, 3000]


@pytest.mark.parametrize(("max_tokens", "expected"), [(1000, [400, 1000]), (120, [120, 120])])
async def test_an_api_sessions_max_tokens(
    engine: MakeEngine, model_server: FakeModelServer, max_tokens: int, expected: list[int]
) -> None:
    """maxTokens is the final answer's budget; a clarifying round gets the smaller of it and
    the question budget."""
    service = engine(max_tokens=2048, question_max_tokens=400)

    reply = await service.sessions.start_session(
        "Plan my running", max_rounds=2, options=ModelOptions(max_tokens=max_tokens)
    )
    await service.sessions.continue_session(reply.consultation_id, "35, 5K in 3 months")

    assert sent_budgets(model_server) == expected
