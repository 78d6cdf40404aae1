"""LLM_MODELS, the models a chat or an API session may choose: parsed from the
environment, checked at start-up with one clear line, handed to the engine and the API."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import Settings, load_settings
from core.domain.errors import ConfigError


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)


def test_without_llm_models_llm_model_is_the_only_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty or unset, the list is LLM_MODEL alone, for chats and for the API."""
    monkeypatch.setenv("LLM_MODEL", "sonar")
    monkeypatch.setenv("LLM_MODELS", "")
    settings = load_settings()
    assert settings.models() == ("sonar",)
    assert settings.engine_config().allowed_models == ("sonar",)
    assert settings.api_config().models == frozenset({"sonar"})


def test_the_list_is_comma_separated_trimmed_and_keeps_its_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spaces around names and empty parts go, a repeated name counts once, the order stays
    (it is the order of /model's buttons)."""
    monkeypatch.setenv("LLM_MODEL", "sonar")
    monkeypatch.setenv("LLM_MODELS", " sonar-pro, sonar,,sonar-pro , gpt-4o ")
    settings = load_settings()
    assert settings.models() == ("sonar-pro", "sonar", "gpt-4o")
    assert settings.engine_config().models == ("sonar-pro", "sonar", "gpt-4o")
    assert settings.api_config().models == frozenset({"sonar-pro", "sonar", "gpt-4o"})


def test_llm_model_must_be_in_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """A list without LLM_MODEL stops the start with a line naming both."""
    monkeypatch.setenv("LLM_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("LLM_MODELS", "sonar,sonar-pro")
    with pytest.raises(ConfigError, match=r"LLM_MODELS: .*'gpt-4o-mini'.*sonar, sonar-pro"):
        load_settings()


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("gpt-4o-mini,my model", "no spaces"),
        ("gpt-4o-mini," + "m" * 101, "at most 100 characters"),
        (",".join(["gpt-4o-mini", *(f"m{n}" for n in range(20))]), "at most 20 models"),
    ],
)
def test_bad_names_and_too_many_models_are_refused(
    monkeypatch: pytest.MonkeyPatch, value: str, fragment: str
) -> None:
    """A name with a space inside, a name over 100 characters, more than 20 models: one
    line naming LLM_MODELS and why."""
    monkeypatch.setenv("LLM_MODELS", value)
    with pytest.raises(ConfigError, match="LLM_MODELS") as raised:
        load_settings()
    assert fragment in str(raised.value)
    assert len(str(raised.value)) < 300


def test_twenty_models_are_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit itself is accepted."""
    monkeypatch.setenv("LLM_MODELS", ",".join(["gpt-4o-mini", *(f"m{n}" for n in range(19))]))
    assert len(load_settings().models()) == 20


def test_the_retired_api_allow_list_stops_the_start_naming_its_successor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An operator's old API_ALLOWED_MODELS is not silently ignored."""
    monkeypatch.setenv("LLM_MODEL", "sonar")
    monkeypatch.setenv("API_ALLOWED_MODELS", "sonar,sonar-pro")
    with pytest.raises(ConfigError, match=r"API_ALLOWED_MODELS was replaced by LLM_MODELS"):
        load_settings()
