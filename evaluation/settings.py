"""The evaluator's three model roles: the bot under test, the simulated user, the judge.

Each role is any OpenAI-compatible endpoint. The bot is exactly what the product runs
(`app.settings.Settings.model_endpoint`), with an optional temperature; the user and the
judge read `EVAL_USER_*` / `EVAL_JUDGE_*`, each value defaulting to the bot's. The bot's
provider-specific request fields (`LLM_EXTRA_BODY`) go only to a role on the bot's own
server: another server may refuse fields it does not know.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from app.settings import Settings
from core.domain.errors import ConfigError
from core.llm.llm import ModelEndpoint

PREFIX = "EVAL_"


class EvalSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=PREFIX,
        env_file=".env",
        env_file_encoding="utf-8",
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
    )

    bot_temperature: float | None = Field(default=None, ge=0, le=2)  # None: server default

    user_base_url: str | None = None
    user_api_key: SecretStr | None = None
    user_model: str | None = None
    user_temperature: float = Field(default=0.7, ge=0, le=2)
    user_max_tokens: int = Field(default=400, ge=1)

    judge_base_url: str | None = None
    judge_api_key: SecretStr | None = None
    judge_model: str | None = None
    judge_temperature: float = Field(default=0.0, ge=0, le=2)
    judge_max_tokens: int = Field(default=1024, ge=1)


@dataclass(frozen=True, slots=True)
class ModelRoles:
    bot: ModelEndpoint
    user: ModelEndpoint
    judge: ModelEndpoint
    user_max_tokens: int
    judge_max_tokens: int


def load_eval_settings() -> EvalSettings:
    """Read the EVAL_* settings; raise `ConfigError` naming the first bad variable."""
    try:
        return EvalSettings()
    except ValidationError as exc:
        error = exc.errors()[0]
        name = PREFIX + str(error["loc"][0]).upper() if error["loc"] else "settings"
        given = error.get("input")
        shown = f" (got {given!r})" if isinstance(given, str | int | float) else ""
        raise ConfigError(f"{name}: {error['msg']}{shown}") from None
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None


def model_roles(settings: Settings, evals: EvalSettings) -> ModelRoles:
    """The three endpoints; `ConfigError` when the bot's own settings are incomplete."""
    bot = dataclasses.replace(settings.model_endpoint(), temperature=evals.bot_temperature)
    return ModelRoles(
        bot=bot,
        user=_role(
            bot,
            "user",
            evals.user_base_url,
            evals.user_api_key,
            evals.user_model,
            evals.user_temperature,
        ),
        judge=_role(
            bot,
            "judge",
            evals.judge_base_url,
            evals.judge_api_key,
            evals.judge_model,
            evals.judge_temperature,
        ),
        user_max_tokens=evals.user_max_tokens,
        judge_max_tokens=evals.judge_max_tokens,
    )


def _role(
    bot: ModelEndpoint,
    name: str,
    base_url: str | None,
    api_key: SecretStr | None,
    model: str | None,
    temperature: float,
) -> ModelEndpoint:
    url = base_url or bot.base_url
    return dataclasses.replace(
        bot,
        name=name,
        base_url=url,
        api_key=api_key.get_secret_value() if api_key is not None else bot.api_key,
        model=model or bot.model,
        temperature=temperature,
        extra_body=dict(bot.extra_body) if url == bot.base_url else {},
    )
