"""What a stored bot runs with (`app.bot_fleet.plan_for`): its profile's settings in place of
the deployment's, the rest the deployment's; its webhook path and secret its own."""

from __future__ import annotations

from typing import Any

from app.bot_fleet import bot_webhook_secret, bot_webhook_url, plan_for
from app.settings import Settings, load_settings
from core.domain.bots import StoredBot, parse_profile


def settings(**values: Any) -> Settings:
    base: dict[str, Any] = {
        "telegram_bot_token": "1:MAIN",
        "openai_api_key": "k",
        "llm_model": "main-model",
        "llm_models": "main-model,other",
        "default_max_rounds": 3,
        "max_rounds_limit": 6,
        "user_daily_token_limit": 1000,
        "user_rate_limit_per_minute": 20,
        "_env_file": None,
    }
    return load_settings(**(base | values))


def bot(**profile: Any) -> StoredBot:
    return StoredBot(7, 77, "seven_bot", "", "sealed", "TAIL", True, parse_profile(profile), 0, 0)


def test_a_profile_replaces_what_it_sets_and_the_rest_falls_back() -> None:
    """Role, rounds (within MAX_ROUNDS_LIMIT), model and limits are the bot's; the
    deployment's allow-list, other limits and token stay; the scope is the bot's id."""
    plan = plan_for(
        settings(),
        bot(role="lawyer", rounds=9, model="other", limits={"messages_per_minute": 5}),
        "77:TOKEN",
    )
    assert (plan.engine.default_role, plan.engine.default_max_rounds) == ("lawyer", 6)
    assert (plan.engine.model, plan.engine.models) == ("other", ("main-model", "other"))
    assert plan.engine.default_instruction is None
    assert plan.quotas.user_daily_tokens == 1000
    assert plan.config.user_rate_limit_per_minute == 5
    assert (plan.config.token, plan.config.scope, plan.config.webhook) == ("77:TOKEN", 7, False)
    assert plan.webhook_url is None and plan.webhook_secret is None


def test_models_without_a_model_keep_the_deployments_model_only_when_they_name_it() -> None:
    """A bot's models naming LLM_MODEL keep it as the default; otherwise their first is."""
    named = plan_for(settings(), bot(models=["x", "main-model"]), "77:T").engine
    assert (named.model, named.models) == ("main-model", ("x", "main-model"))
    unnamed = plan_for(settings(), bot(models=["x", "y"]), "77:T").engine
    assert (unnamed.model, unnamed.models) == ("x", ("x", "y"))


def test_an_instruction_and_a_language_go_to_the_engine_and_the_edge() -> None:
    """The instruction becomes the engine's default persona, the language the edge's."""
    plan = plan_for(settings(), bot(instruction="Be brief.", language="de"), "77:T")
    assert plan.engine.default_instruction == "Be brief."
    assert plan.engine.default_role == "expert"  # the deployment's, for a chat's /role menu
    assert plan.config.language == "de"


def test_with_a_webhook_each_bot_has_its_own_path_and_secret() -> None:
    """WEBHOOK_URL's origin with /telegram/<id>, and a secret derived per bot."""
    plan = plan_for(
        settings(webhook_url="https://bot.example.com/hook/main", webhook_secret="s3cret"),
        bot(),
        "77:T",
    )
    assert plan.config.webhook
    assert plan.webhook_url == bot_webhook_url("https://bot.example.com/x", 7)
    assert plan.webhook_url == "https://bot.example.com/telegram/7"
    assert plan.webhook_secret == bot_webhook_secret("s3cret", 7)
    assert len(plan.webhook_secret) == 64 and plan.webhook_secret != bot_webhook_secret("s3cret", 8)
