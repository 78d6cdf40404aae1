"""The evaluator's three model roles: each its own endpoint, each defaulting to the bot's."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import Settings, load_settings
from core.domain.errors import ConfigError
from evaluation.settings import EvalSettings, load_eval_settings, model_roles


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    for name in [*Settings.model_fields, *(f"eval_{n}" for n in EvalSettings.model_fields)]:
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "bot-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("LLM_MODEL", "bot-model")
    monkeypatch.setenv("LLM_EXTRA_BODY", '{"disable_search": true}')


def test_user_and_judge_default_to_the_bot_s_server_key_and_model() -> None:
    roles = model_roles(load_settings(), load_eval_settings())
    assert [e.name for e in (roles.bot, roles.user, roles.judge)] == ["bot", "user", "judge"]
    for endpoint in (roles.bot, roles.user, roles.judge):
        assert endpoint.base_url == "http://127.0.0.1:1/v1"
        assert endpoint.api_key == "bot-key" and endpoint.model == "bot-model"
        assert endpoint.extra_body == {"disable_search": True}  # the same server: its fields
    assert roles.bot.temperature is None  # the server's default, as the bot runs
    assert roles.user.temperature == 0.7 and roles.judge.temperature == 0.0
    assert roles.user_max_tokens == 400 and roles.judge_max_tokens == 1024


def test_each_role_takes_its_own_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_BOT_TEMPERATURE", "0.2")
    monkeypatch.setenv("EVAL_USER_BASE_URL", "http://127.0.0.1:2/v1")
    monkeypatch.setenv("EVAL_USER_API_KEY", "user-key")
    monkeypatch.setenv("EVAL_USER_MODEL", "user-model")
    monkeypatch.setenv("EVAL_USER_TEMPERATURE", "1.1")
    monkeypatch.setenv("EVAL_JUDGE_BASE_URL", "http://127.0.0.1:3/v1")
    monkeypatch.setenv("EVAL_JUDGE_MODEL", "judge-model")
    monkeypatch.setenv("EVAL_JUDGE_MAX_TOKENS", "300")
    roles = model_roles(load_settings(), load_eval_settings())
    assert roles.bot.temperature == 0.2 and roles.bot.model == "bot-model"
    assert (roles.user.base_url, roles.user.api_key, roles.user.model) == (
        "http://127.0.0.1:2/v1",
        "user-key",
        "user-model",
    )
    assert roles.user.temperature == 1.1
    assert (roles.judge.base_url, roles.judge.api_key, roles.judge.model) == (
        "http://127.0.0.1:3/v1",
        "bot-key",
        "judge-model",
    )
    assert roles.judge_max_tokens == 300
    # Another server gets none of the bot provider's own request fields.
    assert roles.user.extra_body == {} and roles.judge.extra_body == {}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("EVAL_USER_TEMPERATURE", "hot"),
        ("EVAL_JUDGE_TEMPERATURE", "-1"),
        ("EVAL_BOT_TEMPERATURE", "3"),
        ("EVAL_USER_MAX_TOKENS", "0"),
    ],
)
def test_a_bad_value_is_one_config_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=f"^{name}: "):
        load_eval_settings()


def test_a_missing_bot_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        model_roles(load_settings(), load_eval_settings())


def test_settings_come_from_the_env_file_too(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("EVAL_JUDGE_MODEL=from-file\n", encoding="utf-8")
    assert model_roles(load_settings(), load_eval_settings()).judge.model == "from-file"
