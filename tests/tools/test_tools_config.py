"""MCP_SERVERS, MCP_TOOLS_ALLOW and the tools' settings are read strictly: a mistake stops
the start with one line naming the variable, the server and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.logs import secrets_of
from app.settings import Settings, load_settings
from core.domain.errors import ConfigError
from tools.config import McpServerConfig, parse_allow, parse_servers, tools_config
from tools.toolbox import model_name


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "k")


def test_a_stdio_and_an_http_server_are_read_with_every_field() -> None:
    servers = parse_servers(
        json.dumps(
            {
                "time": {
                    "command": "mcp-server-time",
                    "args": ["--local-timezone=UTC"],
                    "env": {"TZ": "UTC"},
                    "cwd": "/tmp",
                },
                "docs": {"url": "http://127.0.0.1:8800/mcp", "headers": {"X-Key": "k"}},
            }
        )
    )
    assert servers == (
        McpServerConfig(
            name="time",
            command="mcp-server-time",
            args=("--local-timezone=UTC",),
            env={"TZ": "UTC"},
            cwd="/tmp",
        ),
        McpServerConfig(name="docs", url="http://127.0.0.1:8800/mcp", headers={"X-Key": "k"}),
    )
    assert [s.transport for s in servers] == ["stdio", "http"]
    assert "k" not in servers[1].describe()  # headers may hold a token: never logged


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{", "MCP_SERVERS: not valid JSON"),
        ("[]", "MCP_SERVERS: must be a JSON object"),
        ('{"time": "mcp-server-time"}', "MCP_SERVERS.time: must be an object"),
        ('{"time": {"command": "x", "args": "--utc"}}', "MCP_SERVERS.time.args: must be a list"),
        ('{"time": {"command": "x", "args": [1]}}', "MCP_SERVERS.time.args: must be a list"),
        ('{"time": {"command": ""}}', "MCP_SERVERS.time.command: must be a non-empty string"),
        ('{"time": {"command": "x", "env": {"A": 1}}}', "MCP_SERVERS.time.env: must be an object"),
        ('{"time": {"command": "x", "argz": []}}', "MCP_SERVERS.time.argz: unknown key"),
        ('{"time": {"command": "x", "url": "http://h"}}', "MCP_SERVERS.time: needs exactly one of"),
        ('{"time": {}}', "MCP_SERVERS.time: needs exactly one of"),
        ('{"time": {"command": "x", "headers": {}}}', "MCP_SERVERS.time.headers: only for"),
        ('{"docs": {"url": "http://h", "args": []}}', "MCP_SERVERS.docs.args: only for"),
        (
            '{"docs": {"url": "ftp://h"}}',
            "MCP_SERVERS.docs.url: must start with http:// or https://",
        ),
        ('{"docs": {"url": "http://h", "headers": []}}', "MCP_SERVERS.docs.headers: must be"),
        ('{"my docs": {"url": "http://h"}}', "MCP_SERVERS.my docs: a server's name is"),
        ('{"a__b": {"url": "http://h"}}', "MCP_SERVERS.a__b: a server's name is"),
        ('{"' + "x" * 33 + '": {"url": "http://h"}}', "a server's name is 1-32"),
        ('{"knowledge": {"url": "http://h"}}', "MCP_SERVERS.knowledge: the name is"),
    ],
)
def test_a_bad_server_entry_names_the_server_and_the_field(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_servers(value)
    assert message in str(error.value)


def test_too_many_servers_are_refused() -> None:
    many = {f"s{i}": {"url": "http://h"} for i in range(21)}
    with pytest.raises(ConfigError, match="at most 20 servers"):
        parse_servers(json.dumps(many))


def test_allow_patterns_narrow_what_the_model_sees() -> None:
    config = tools_config(
        json.dumps({"time": {"command": "x"}, "docs": {"url": "http://h"}}),
        " time.* , docs.search,",
    )
    assert config.allow == ("time.*", "docs.search")
    assert config.allows("time", "get_current_time")
    assert config.allows("docs", "search")
    assert not config.allows("docs", "delete_everything")
    assert not config.allows("docs", "Search")  # case counts
    assert tools_config(json.dumps({"time": {"command": "x"}}), "").allows("time", "anything")


@pytest.mark.parametrize(
    ("allow", "message"),
    [
        ("time", "'time' is not a server.tool pattern"),
        ("time.", "is not a server.tool pattern"),
        ("tiem.*", "'tiem.*' names no server of MCP_SERVERS (time)"),
    ],
)
def test_a_bad_allow_pattern_is_refused(allow: str, message: str) -> None:
    servers = parse_servers('{"time": {"command": "x"}}')
    with pytest.raises(ConfigError) as error:
        parse_allow(allow, servers)
    assert str(error.value).startswith("MCP_TOOLS_ALLOW: ")
    assert message in str(error.value)


def test_tools_enabled_false_offers_no_server_but_still_checks_them() -> None:
    assert tools_config('{"time": {"command": "x"}}', "", enabled=False).servers == ()
    with pytest.raises(ConfigError):
        tools_config('{"time": {"command": 1}}', "", enabled=False)


def test_model_names_fit_openais_rule() -> None:
    assert model_name("time", "get_current_time") == "time__get_current_time"
    assert model_name("docs", "look.up/v2") == "docs__look_up_v2"
    long = model_name("docs", "x" * 100)
    assert long is not None and len(long) == 64
    assert model_name("docs", "...") is None
    assert model_name("docs", "") is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"MCP_SERVERS": '{"time": {"command": "x", "args": "-v"}}'},
            "MCP_SERVERS.time.args: must be a list of strings",
        ),
        (
            {"MCP_SERVERS": '{"time": {"command": "x"}}', "MCP_TOOLS_ALLOW": "clock.*"},
            "MCP_TOOLS_ALLOW: 'clock.*' names no server",
        ),
        ({"MCP_TOOLS_ALLOW": "time.*"}, "MCP_TOOLS_ALLOW: 'time.*' names no server"),
        ({"TOOL_TIMEOUT_SECONDS": "0"}, "TOOL_TIMEOUT_SECONDS:"),
        ({"TOOL_RESULT_MAX_CHARS": "10"}, "TOOL_RESULT_MAX_CHARS:"),
        ({"TOOLS_ENABLED": "perhaps"}, "TOOLS_ENABLED:"),
    ],
)
def test_bad_tool_settings_stop_the_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_the_settings_build_the_tools_config(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = load_settings().tools_config()
    assert defaults.servers == ()
    assert (defaults.timeout_seconds, defaults.result_max_chars) == (20, 8000)
    monkeypatch.setenv("MCP_SERVERS", '{"time": {"command": "mcp-server-time"}}')
    monkeypatch.setenv("MCP_TOOLS_ALLOW", "time.get_*")
    monkeypatch.setenv("TOOL_TIMEOUT_SECONDS", "5")
    monkeypatch.setenv("TOOL_RESULT_MAX_CHARS", "1000")
    config = load_settings().tools_config()
    assert [s.name for s in config.servers] == ["time"]
    assert config.allow == ("time.get_*",)
    assert (config.timeout_seconds, config.result_max_chars) == (5, 1000)
    monkeypatch.setenv("TOOLS_ENABLED", "false")
    assert load_settings().tools_config().servers == ()


def test_an_http_servers_headers_are_secrets_no_log_line_shows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "MCP_SERVERS",
        json.dumps(
            {"docs": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer s3cr3t-tok"}}}
        ),
    )
    secrets = secrets_of(load_settings())
    assert "Bearer s3cr3t-tok" in secrets and "s3cr3t-tok" in secrets
