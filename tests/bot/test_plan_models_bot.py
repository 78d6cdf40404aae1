"""A plan's `models`, end to end: bought, the plan's first model is the one the model server
is asked for and /model offers the plan's models first; without the plan (never bought,
refunded, or ended) they are refused and the deployment's LLM_MODEL is called again.

The real bot against the fake Bot API and the fake model server, on a SQLite file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot.test_plans_bot import ADMIN, USER, pay, say
from tests.bot_harness import RunningBot, bot_settings, buttons, running_bot

PERSON = f"tg:{USER}"
PLANS = [
    {
        "id": "pro",
        "title": "Pro",
        "stars": 250,
        "days": 1,
        "models": ["gpt-4o", "o3"],
    },
    {"id": "lite", "title": "Lite", "stars": 50, "days": 1},
]
SETTINGS = {
    "llm_models": "test-model,sonar",
    "admin_user_ids": str(ADMIN),
    "plans": json.dumps(PLANS),
}

pytestmark = pytest.mark.bot_settings(**SETTINGS)


async def asked_with(bot: RunningBot, text: str) -> str:
    """Ask `text` in the person's chat and return the model the server was sent."""
    bot.model.enqueue(f"About {text}?")
    before = len(bot.model.requests)
    reply = await say(bot, USER, text)
    assert f"About {text}?" in reply.params["text"]
    assert len(bot.model.requests) == before + 1
    return str(bot.model.requests[-1]["model"])


async def test_a_plans_model_is_called_after_purchase_and_not_after_the_refund(
    bot: RunningBot,
) -> None:
    """Before: LLM_MODEL, and /model refuses the plan's model. Bought: the plan's first
    model is called (and /status names it), /model lists the plan's models first and a
    deployment's model chosen is honoured. Refunded: the plan's model chosen is said
    removed, LLM_MODEL is called."""
    assert await asked_with(bot, "Pick a database") == "test-model"
    refused = await say(bot, USER, "/model gpt-4o")
    assert refused.params["text"].startswith("Unknown model")
    assert "test-model, sonar" in refused.params["text"]
    shown = await say(bot, USER, "/model")
    assert [b["text"] for row in shown.params["reply_markup"]["inline_keyboard"] for b in row] == [
        "✓ test-model",
        "sonar",
    ]

    receipt = await pay(bot, USER, f"plan:pro:{PERSON}", 250, charge_id="ch-models")
    assert receipt.params["text"].startswith("Thank you! Pro is yours until ")
    assert await asked_with(bot, "For analytics") == "gpt-4o"
    assert "gpt-4o" in (await say(bot, USER, "/status")).params["text"]
    shown = await say(bot, USER, "/model")
    assert [b["text"] for row in shown.params["reply_markup"]["inline_keyboard"] for b in row] == [
        "✓ gpt-4o",
        "o3",
        "test-model",
        "sonar",
    ]
    assert (await say(bot, USER, "/model sonar")).params["text"].startswith("Model set to sonar.")
    assert await asked_with(bot, "Mostly reads") == "sonar"
    assert (await say(bot, USER, "/model o3")).params["text"].startswith("Model set to o3.")
    assert await asked_with(bot, "Ten gigabytes") == "o3"

    done = await say(bot, ADMIN, "/refund ch-models")
    assert done.params["text"].startswith("Refunded 250 ⭐")
    assert await asked_with(bot, "And backups") == "test-model"
    shown = await say(bot, USER, "/model")
    assert shown.params["text"].startswith(
        "The model “o3” chosen here is no longer available: test-model is used."
    )
    assert buttons(shown) and len(buttons(shown)) == 2
    assert (await say(bot, USER, "/model o3")).params["text"].startswith("Unknown model")


async def test_a_plan_without_models_changes_no_model(bot: RunningBot) -> None:
    """A plan listing no models leaves the person with the deployment's models."""
    await pay(bot, USER, f"plan:lite:{PERSON}", 50, charge_id="ch-lite")
    assert await asked_with(bot, "Pick a queue") == "test-model"
    assert (await say(bot, USER, "/model gpt-4o")).params["text"].startswith("Unknown model")


async def test_a_plans_model_is_not_called_once_the_plan_ended(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A day's plan: its model is called while it lasts; two days on (the plans read
    afresh, as every worker does within OVERRIDE_CACHE_SECONDS) LLM_MODEL is called again."""
    offset = [0.0]

    def clock() -> float:
        return time.time() + offset[0]

    settings = bot_settings(tmp_path / "bot.sqlite3", bot_api, model_server, **SETTINGS)
    async with running_bot(settings, bot_api, model_server, clock=clock) as bot:
        await pay(bot, USER, f"plan:pro:{PERSON}", 250, charge_id="ch-ends")
        assert await asked_with(bot, "Pick a cache") == "gpt-4o"
        await say(bot, USER, "/reset")
        offset[0] = 2 * 86_400.0
        bot.runtime.engine.quotas.refresh(PERSON)
        assert await asked_with(bot, "Pick a cache again") == "test-model"
