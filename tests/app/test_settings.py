"""Settings: read from the environment, one clear error per bad value, all documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.settings import RETIRED, Settings, load_settings
from core.domain.api_keys import person_key
from core.domain.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)


def test_defaults_match_the_spec() -> None:
    """Without any variable the documented defaults apply."""
    settings = load_settings()
    assert settings.default_max_rounds == 3
    assert settings.session_ttl_seconds == 3600
    assert settings.max_rounds_limit == 10
    assert settings.followup_limit == 5
    assert settings.engine_config().followup_limit == 5
    assert (settings.knowledge_top_k, settings.knowledge_max_chars) == (6, 6000)
    assert settings.engine_config().knowledge_top_k == 6
    assert settings.engine_config().knowledge_max_chars == 6000
    assert settings.telegram_bot_token is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DEFAULT_MAX_ROUNDS", "abc"),
        ("DEFAULT_MAX_ROUNDS", "0"),
        ("SESSION_TTL_SECONDS", "-5"),
        ("API_PORT", "70000"),
        ("ALLOWED_USER_IDS", "12,bob"),
        ("LLM_EXTRA_BODY", "{not json"),
        ("API_ENABLED", "maybe"),
        ("DATABASE_URL", "mysql://root@127.0.0.1/db"),
        ("DATABASE_POOL_SIZE", "0"),
        ("FOLLOWUP_LIMIT", "-1"),
        ("FOLLOWUP_LIMIT", "51"),
        ("KNOWLEDGE_TOP_K", "0"),
        ("KNOWLEDGE_MAX_CHARS", "50"),
        ("QUOTA_EXEMPT_USER_IDS", "12,bob"),
        ("QUOTA_EXEMPT_USER_IDS", "api:"),
        ("QUOTA_EXEMPT_USER_IDS", "api:two words"),
        ("QUOTA_EXEMPT_USER_IDS", "api:" + "u" * 65),
        ("QUOTA_EXEMPT_USER_IDS", "tg:12"),
        ("QUOTA_EXEMPT_USER_IDS", "api0:u-1"),
        ("QUOTA_EXEMPT_USER_IDS", "api07:u-1"),
        ("QUOTA_EXEMPT_USER_IDS", "api-7:u-1"),
        ("QUOTA_EXEMPT_USER_IDS", "api7:"),
        ("QUOTA_EXEMPT_USER_IDS", "api7:two words"),
        ("QUOTA_EXEMPT_USER_IDS", "api9223372036854775808:u-1"),
        ("PLANS", "{not json"),
        ("PLANS", '[{"id": "Pro!", "title": "Pro", "stars": 5}]'),
        ("PLANS", '[{"id": "pro", "title": "Pro", "stars": 0}]'),
    ],
)
def test_invalid_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """A bad value raises one ConfigError whose message starts with the variable's name."""
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=rf"^{name}\b"):
        load_settings()


def test_default_rounds_above_the_ceiling_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """DEFAULT_MAX_ROUNDS may not exceed MAX_ROUNDS_LIMIT."""
    monkeypatch.setenv("DEFAULT_MAX_ROUNDS", "12")
    with pytest.raises(ConfigError, match="DEFAULT_MAX_ROUNDS"):
        load_settings()


def test_lists_and_json_are_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Id lists are comma-separated; provider extras are JSON."""
    monkeypatch.setenv("ALLOWED_USER_IDS", "1, 2,3")
    monkeypatch.setenv("LLM_EXTRA_BODY", '{"disable_search": true}')
    settings = load_settings()
    assert settings.allowed_user_ids == {1, 2, 3}
    assert settings.llm_extra_body == {"disable_search": True}


def test_quota_exemptions_name_telegram_ids_and_api_users(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """QUOTA_EXEMPT_USER_IDS takes Telegram ids and `api:<userId>` (an API user, as its
    requests' `userId` names it), `api<n>:<userId>` for stored bot n's; with ADMIN_USER_IDS
    they are the person keys exempt."""
    monkeypatch.setenv("QUOTA_EXEMPT_USER_IDS", "7, api:u-1;api:team.a@example.com, api12:u-1")
    monkeypatch.setenv("ADMIN_USER_IDS", "9")
    config = load_settings().quota_config()
    assert config.exempt == {"tg:7", "tg:9", "api:u-1", "api:team.a@example.com", "api12:u-1"}
    assert config.exempts(person_key("u-1", 12)) and not config.exempts(person_key("u-1", 13))
    assert not config.exempts(person_key("team.a@example.com", 12))


def test_a_refused_exemption_says_what_it_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry of no accepted form is named, with the forms accepted."""
    monkeypatch.setenv("QUOTA_EXEMPT_USER_IDS", "7,api07:u-1")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert "'api07:u-1' is not a Telegram id, api:<userId> nor api<bot id>:<userId>" in str(
        refused.value
    )


def test_secrets_are_hidden_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokens never appear in logs of the settings object."""
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:secret-token")
    settings = load_settings()
    assert "secret-token" not in repr(settings)
    assert settings.secret("telegram_bot_token") == "123:secret-token"


def test_env_example_documents_exactly_the_settings() -> None:
    """Every setting is in .env.example and .env.example names no unknown variable."""
    text = (ROOT / ".env.example").read_text()
    documented = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", text, flags=re.MULTILINE))
    assert documented == {name.upper() for name in Settings.model_fields if name not in RETIRED}


def test_env_example_loads_as_is() -> None:
    """The example file is itself a valid configuration (empty values mean defaults)."""
    load_settings(_env_file=str(ROOT / ".env.example"))


def test_the_database_password_is_among_the_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PostgreSQL URL's password never reaches a log line."""
    from app.logs import secrets_of

    monkeypatch.setenv("DATABASE_URL", "postgresql://bot:s3cret-pass@db:5432/consult")
    settings = load_settings()
    assert "s3cret-pass" in secrets_of(settings)
    assert settings.database_pool_size == 10


def test_the_configuration_reference_has_a_row_for_exactly_the_settings() -> None:
    """docs/configuration.md names every setting in the first cell of a table row, and
    names no variable that is not a setting."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    first_cells = re.findall(r"^\| ([^|]*) \|", text, flags=re.MULTILINE)
    documented = {name for cell in first_cells for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cell)}
    assert documented == {name.upper() for name in Settings.model_fields if name not in RETIRED}


def test_the_console_token_is_among_the_secrets() -> None:
    """ADMIN_TOKEN never reaches a log line."""
    from app.logs import secrets_of

    settings = load_settings(admin_token="console-secret-0123456789", _env_file=None)
    assert "console-secret-0123456789" in secrets_of(settings)


def test_embeddings_are_off_until_a_model_is_named_and_default_to_the_models_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """EMBEDDING_MODEL unset: no endpoint (full text only). Set: the URL and key are the
    chat model's unless EMBEDDING_BASE_URL / EMBEDDING_API_KEY say otherwise."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-chat")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://models.local/v1")
    assert load_settings().embedding_endpoint() is None
    monkeypatch.setenv("EMBEDDING_MODEL", "text-embedding-3-small")
    monkeypatch.setenv("EMBEDDING_DIMENSIONS", "512")
    endpoint = load_settings().embedding_endpoint()
    assert endpoint is not None
    assert (endpoint.model, endpoint.api_key, endpoint.base_url) == (
        "text-embedding-3-small", "sk-chat", "http://models.local/v1",
    )  # fmt: skip
    assert (endpoint.dimensions, endpoint.batch, endpoint.query_seconds) == (512, 64, 5.0)
    monkeypatch.setenv("EMBEDDING_API_KEY", "sk-embed")
    monkeypatch.setenv("EMBEDDING_BASE_URL", "http://vectors.local/v1")
    endpoint = load_settings().embedding_endpoint()
    assert endpoint is not None
    assert (endpoint.api_key, endpoint.base_url) == ("sk-embed", "http://vectors.local/v1")


def test_embeddings_without_any_key_fail_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDING_MODEL", "text-embedding-3-small")
    with pytest.raises(ConfigError, match="EMBEDDING_API_KEY"):
        load_settings().embedding_endpoint()
    monkeypatch.setenv("EMBEDDING_DIMENSIONS", "0")
    with pytest.raises(ConfigError, match="EMBEDDING_DIMENSIONS"):
        load_settings()


def test_the_handling_deadline_makes_room_for_the_turns_tool_calls() -> None:
    """A turn may call the model and a tool TOOLS_MAX_CALLS times before its answer: the
    default deadline allows for them when tools are on, and not when they are off."""
    plain = load_settings(tools_enabled=False)
    tooled = load_settings(
        mcp_servers='{"time": {"command": "mcp-server-time"}}', knowledge_tool=False
    )
    assert plain.handling_deadline() == 4 * 600.0 + 300.0
    assert tooled.handling_deadline() == (4 + 6) * 600.0 + 6 * 20.0 + 300.0
