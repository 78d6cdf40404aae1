"""What a stored bot's engine runs with: its settings in place of the deployment's.

Invariant: a bot's `BotProfile` replaces the deployment's role (or gives an instruction of
its own), rounds (at most MAX_ROUNDS_LIMIT), model and models and limits; what it does not
set falls back to the deployment's settings — the same for its Telegram chats
(`app.bot_fleet`) and its API requests (`app.api_bots`).
"""

from __future__ import annotations

import dataclasses

from app.settings import Settings
from core.domain.bots import BotProfile
from core.domain.plans import Plan
from core.domain.quotas import QuotaConfig
from core.prompting.requests import EngineConfig


def bot_settings(settings: Settings, profile: BotProfile) -> Settings:
    """The deployment's settings with what `profile` sets in their place (the instruction
    goes in `engine_config_of`, having no setting of its own). Models set without a model:
    the deployment's LLM_MODEL when they name it, else their first."""
    update: dict[str, object] = {}
    if profile.role is not None:
        update["default_role"] = profile.role
    if profile.rounds is not None:
        update["default_max_rounds"] = min(profile.rounds, settings.max_rounds_limit)
    if profile.models:
        update["llm_models"] = profile.models
        if profile.model is None and settings.llm_model not in profile.models:
            update["llm_model"] = profile.models[0]
    if profile.model is not None:
        update["llm_model"] = profile.model
    limits = profile.limits
    for setting, value in (
        ("user_daily_token_limit", limits.daily_tokens),
        ("user_monthly_token_limit", limits.monthly_tokens),
        ("user_daily_consultation_limit", limits.daily_consultations),
        ("user_rate_limit_per_minute", limits.messages_per_minute),
    ):
        if value is not None:
            update[setting] = value
    return settings.model_copy(update=update)


def engine_config_of(own: Settings, profile: BotProfile) -> EngineConfig:
    """The engine's defaults of a bot whose settings are `own` (`bot_settings`), with its
    instruction, if it has one."""
    config = own.engine_config()
    if profile.instruction is not None:
        config = dataclasses.replace(config, default_instruction=profile.instruction)
    return config


def engine_defaults(
    settings: Settings, profile: BotProfile
) -> tuple[EngineConfig, QuotaConfig, tuple[Plan, ...]]:
    """A stored bot's engine and quota defaults and the plans it sells (its own, else
    PLANS): what its engine runs with here, and what the console reads its people by."""
    own = bot_settings(settings, profile)
    plans = settings.plan_list() if profile.plans is None else profile.plans
    return engine_config_of(own, profile), own.quota_config(), plans
