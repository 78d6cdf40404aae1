"""MCP_SERVERS and MCP_TOOLS_ALLOW, read strictly: the servers a deployment gives the
expert, and which of their tools the model sees.

Invariant: a `ToolsConfig` that exists is one the toolbox can run. Every server has a
name that leaves room for its tools' names in `<server>__<tool>` (OpenAI's
`^[a-zA-Z0-9_-]{1,64}$`) and exactly one transport (a command run as a child process, or
a streamable HTTP URL); an unknown key, a wrong type, or an allow pattern naming no
configured server stops the start with a `ConfigError` naming the variable, the server
and the field ("MCP_SERVERS.time.args: must be a list of strings"), never a silently
ignored setting. This module imports no MCP code: settings read it in every process.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.domain.errors import ConfigError
from core.domain.tools import SEPARATOR

SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
"""A server's name: it prefixes each tool's name, so it is short and of OpenAI's alphabet."""
RESERVED = frozenset({"knowledge"})
"""Names the engine's own tools use (`knowledge__search`)."""
MAX_SERVERS = 20
STDIO_KEYS = frozenset({"command", "args", "env", "cwd"})
HTTP_KEYS = frozenset({"url", "headers"})


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One MCP server: a child process spoken to over stdio (`command`), or a streamable
    HTTP endpoint (`url`); never both."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # over the SDK's safe defaults
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def describe(self) -> str:
        """Where it runs, for logs (never the headers: they may hold a token)."""
        if self.command is not None:
            return " ".join([self.command, *self.args])
        return str(self.url)


@dataclass(frozen=True, slots=True)
class ToolsConfig:
    """The tool servers and the bounds of every call; `servers` empty: no tools at all."""

    servers: tuple[McpServerConfig, ...] = ()
    allow: tuple[str, ...] = ()  # `server.tool` fnmatch patterns; empty: every tool
    timeout_seconds: float = 20.0
    result_max_chars: int = 8000

    def allows(self, server: str, tool: str) -> bool:
        """Whether the model may see `tool` of `server` (MCP_TOOLS_ALLOW)."""
        if not self.allow:
            return True
        name = f"{server}.{tool}"
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.allow)


def parse_servers(text: str) -> tuple[McpServerConfig, ...]:
    """MCP_SERVERS, a JSON object of server names to their settings; empty text: none."""
    if not text.strip():
        return ()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"MCP_SERVERS: not valid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError('MCP_SERVERS: must be a JSON object, e.g. {"time": {"command": …}}')
    if len(data) > MAX_SERVERS:
        raise ConfigError(f"MCP_SERVERS: at most {MAX_SERVERS} servers, got {len(data)}")
    return tuple(_server(name, value) for name, value in data.items())


def _server(name: str, value: Any) -> McpServerConfig:
    where = f"MCP_SERVERS.{name[:40]}"
    if not SERVER_NAME.fullmatch(name) or SEPARATOR in name:
        raise ConfigError(
            f"{where}: a server's name is 1-32 letters, digits, '-' or '_' (no '__'), "
            "starting with a letter or digit: it prefixes its tools' names"
        )
    if name in RESERVED:
        raise ConfigError(
            f"{where}: the name is the engine's own (knowledge__search); pick another"
        )
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be an object with a command or a url")
    unknown = sorted(set(value) - STDIO_KEYS - HTTP_KEYS)
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]}: unknown key (a server takes command, args, env, cwd "
            "or url, headers)"
        )
    if ("command" in value) == ("url" in value):
        raise ConfigError(f"{where}: needs exactly one of command (stdio) or url (HTTP)")
    if "command" in value:
        extra = sorted(set(value) & HTTP_KEYS)
        if extra:
            raise ConfigError(f"{where}.{extra[0]}: only for a server with a url")
        return McpServerConfig(
            name=name,
            command=_text(value["command"], f"{where}.command"),
            args=_texts(value.get("args", []), f"{where}.args"),
            env=_pairs(value.get("env", {}), f"{where}.env"),
            cwd=_text(value["cwd"], f"{where}.cwd") if "cwd" in value else None,
        )
    extra = sorted(set(value) & STDIO_KEYS)
    if extra:
        raise ConfigError(f"{where}.{extra[0]}: only for a server with a command")
    url = _text(value["url"], f"{where}.url")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}.url: must start with http:// or https://")
    return McpServerConfig(
        name=name, url=url, headers=_pairs(value.get("headers", {}), f"{where}.headers")
    )


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: must be a non-empty string")
    return value


def _texts(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where}: must be a list of strings")
    return tuple(value)


def _pairs(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{where}: must be an object of strings")
    return dict(value)


def parse_allow(text: str, servers: tuple[McpServerConfig, ...]) -> tuple[str, ...]:
    """MCP_TOOLS_ALLOW, comma-separated `server.tool` patterns (fnmatch: `time.*`,
    `docs.search`); a pattern whose server part names no configured server is a typo."""
    names = [server.name for server in servers]
    patterns = []
    for part in text.split(","):
        pattern = part.strip()
        if not pattern:
            continue
        server, dot, tool = pattern.partition(".")
        if not dot or not server or not tool:
            raise ConfigError(
                f"MCP_TOOLS_ALLOW: {pattern[:60]!r} is not a server.tool pattern (e.g. time.*)"
            )
        if not fnmatch.filter(names, server):
            raise ConfigError(
                f"MCP_TOOLS_ALLOW: {pattern[:60]!r} names no server of MCP_SERVERS "
                f"({', '.join(names) or 'none configured'})"
            )
        patterns.append(pattern)
    return tuple(patterns)


def tools_config(
    servers: str,
    allow: str,
    *,
    enabled: bool = True,
    timeout_seconds: float = 20.0,
    result_max_chars: int = 8000,
) -> ToolsConfig:
    """The whole tools configuration; TOOLS_ENABLED=false gives no servers (still parsed, so
    a broken MCP_SERVERS is found before it is switched on)."""
    parsed = parse_servers(servers)
    patterns = parse_allow(allow, parsed)
    return ToolsConfig(
        servers=parsed if enabled else (),
        allow=patterns,
        timeout_seconds=timeout_seconds,
        result_max_chars=result_max_chars,
    )
