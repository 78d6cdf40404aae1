"""`McpToolbox`: the MCP servers' tools as the engine's `Toolbox`.

The model sees each allowed tool of each ready server as `<server>__<tool>` with the
tool's own JSON schema; a tool whose name has characters OpenAI refuses is offered under
a sanitised name, one whose name or schema cannot be offered is left out, each with one
log line. A call is checked before it reaches the server (known name, arguments a JSON
object matching the schema), then run within TOOL_TIMEOUT_SECONDS, and its result joined
into text cut at TOOL_RESULT_MAX_CHARS.

Invariants: `call` never raises for a tool's failure; its `ToolUse` says what went wrong
in a short line the model can act on (`ToolFailure` for metrics) and carries bounded
arguments and a bounded result, whatever the server sent; the result's text is built
from at most TOOL_RESULT_MAX_CHARS characters of the content the SDK read, never by
joining all of it; calls run concurrently, also on one server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import SchemaError
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from mcp import types as mcp_types
from referencing import Registry

from core.domain.tools import (
    SEPARATOR,
    TOOL_NAME,
    ToolCall,
    ToolFailure,
    ToolServerStatus,
    ToolSpec,
    ToolUse,
)
from tools.config import ToolsConfig
from tools.servers import (
    FIRST_RETRY_SECONDS,
    LONGEST_RETRY_SECONDS,
    PING_EVERY_SECONDS,
    ListedTool,
    McpServer,
    ServerGone,
)

log = logging.getLogger(__name__)

START_WAIT_SECONDS = 30.0
"""How long `start` waits for the servers' first start (they keep trying after it)."""
MAX_DESCRIPTION_CHARS = 1024
MAX_SCHEMA_CHARS = 16_000
"""A tool's description and schema ride in every model call that offers tools."""
MAX_ARGUMENTS_CHARS = 20_000
"""Arguments longer than this are refused unread."""
ARGUMENTS_SHOWN_CHARS = 2000
ERROR_CHARS = 500
UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class _Offered:
    spec: ToolSpec
    validator: Validator


class McpToolbox:
    """The tools of the configured MCP servers (`start` before use, `close` at the end)."""

    def __init__(
        self,
        config: ToolsConfig,
        *,
        first_retry: float = FIRST_RETRY_SECONDS,
        longest_retry: float = LONGEST_RETRY_SECONDS,
        start_seconds: float = START_WAIT_SECONDS,
        ping_every: float = PING_EVERY_SECONDS,
    ) -> None:
        self._config = config
        self._servers = {
            server.name: McpServer(
                server,
                first_retry=first_retry,
                longest_retry=longest_retry,
                start_seconds=start_seconds,
                ping_every=ping_every,
            )
            for server in config.servers
        }
        self._offered: dict[str, dict[str, _Offered]] = {}  # server -> model name -> tool
        self._listed: dict[str, tuple[ListedTool, ...]] = {}  # the listing `_offered` is of
        self._told: set[tuple[str, str]] = set()  # tools already logged as renamed or left out

    async def start(self) -> None:
        """Start every server and wait for each one's first start, ready or failed (at
        most `start_seconds` and the time to stop a child that did not answer): the bot
        then runs with the tools of those that are up."""
        for server in self._servers.values():
            server.start()
        await asyncio.gather(*(server.wait_started() for server in self._servers.values()))

    async def close(self) -> None:
        """Stop every server (stdio children included); nothing is left running."""
        await asyncio.gather(*(server.close() for server in self._servers.values()))

    def specs(self) -> Sequence[ToolSpec]:
        """The allowed tools of the servers that are ready now."""
        return [
            offered.spec
            for server in self._servers.values()
            if server.ready
            for offered in self._offer(server).values()
        ]

    def statuses(self) -> tuple[ToolServerStatus, ...]:
        return tuple(
            ToolServerStatus(
                name=server.name,
                state=server.state,
                tools=len(self._offer(server)) if server.ready else 0,
                error=server.error,
            )
            for server in self._servers.values()
        )

    async def call(self, call: ToolCall) -> ToolUse:
        """Run one call the model asked for; a failure is a `ToolUse` that says it."""
        began = time.monotonic()
        shown = call.arguments[:ARGUMENTS_SHOWN_CHARS]
        found = self._find(call.name)
        if found is None:
            return ToolUse(
                name=call.name[:64],
                server="",
                tool="",
                arguments=shown,
                error=f"no tool named {call.name[:64]!r}; call one of the tools offered",
                failure=ToolFailure.UNKNOWN_TOOL,
            )
        server, offered = found
        spec = offered.spec

        def used(
            result: str = "", error: str | None = None, failure: ToolFailure | None = None
        ) -> ToolUse:
            return ToolUse(
                name=spec.name,
                server=spec.server,
                tool=spec.tool,
                arguments=shown,
                result=result,
                error=error,
                failure=failure,
                ms=round((time.monotonic() - began) * 1000),
            )

        arguments, problem = _arguments(call.arguments, offered.validator)
        if arguments is None:
            return used(
                error=f"invalid arguments: {problem}", failure=ToolFailure.INVALID_ARGUMENTS
            )
        timeout = self._config.timeout_seconds
        try:
            result = await server.call(spec.tool, arguments, timeout)
        except TimeoutError:
            return used(error=f"timed out after {timeout:g} s", failure=ToolFailure.TIMEOUT)
        except ServerGone:
            return used(error="server gone", failure=ToolFailure.UNAVAILABLE)
        except Exception as exc:  # the server answered something the SDK refused
            log.warning("tool %s: the server's answer was refused: %s", spec.name, exc)
            detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            return used(error=f"the tool's server failed: {detail}", failure=ToolFailure.FAILED)
        text = result_text(result, self._config.result_max_chars)
        if result.is_error:
            return used(
                error=(text or "the tool reported an error")[:ERROR_CHARS],
                failure=ToolFailure.FAILED,
            )
        return used(result=text)

    def _find(self, name: str) -> tuple[McpServer, _Offered] | None:
        """The server and tool a model name stands for, also of a server that is down now
        (its call then answers "server gone", not "no such tool")."""
        for server in self._servers.values():
            offered = self._offer(server).get(name)
            if offered is not None:
                return server, offered
        return None

    def _offer(self, server: McpServer) -> dict[str, _Offered]:
        """The server's allowed tools under their model names, built once per listing."""
        if self._listed.get(server.name) is not server.tools:
            self._offered[server.name] = dict(self._build(server.name, server.tools))
            self._listed[server.name] = server.tools
        return self._offered.get(server.name, {})

    def _build(self, server: str, tools: Iterable[ListedTool]) -> Iterable[tuple[str, _Offered]]:
        taken: set[str] = set()
        for tool in tools:
            if not self._config.allows(server, tool.name):
                continue
            name = model_name(server, tool.name)
            if name is None or name in taken:
                self._tell(
                    server, tool.name, "left out: its name cannot be made a unique tool name"
                )
                continue
            schema = tool.schema or {"type": "object", "properties": {}}
            validator = _validator(schema)
            if validator is None or len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
                self._tell(server, tool.name, "left out: its input schema is invalid or too large")
                continue
            if name != f"{server}{SEPARATOR}{tool.name}":
                self._tell(server, tool.name, f"offered to the model as {name}", logging.INFO)
            taken.add(name)
            spec = ToolSpec(
                name=name,
                server=server,
                tool=tool.name,
                description=tool.description[:MAX_DESCRIPTION_CHARS],
                parameters=schema,
            )
            yield name, _Offered(spec, validator)

    def _tell(self, server: str, tool: str, what: str, level: int = logging.WARNING) -> None:
        """Say once per tool what became of its name or schema (a restart lists it again)."""
        if (server, tool) not in self._told:
            self._told.add((server, tool))
            log.log(level, "tool server %s: tool %r %s", server, tool[:80], what)


def model_name(server: str, tool: str) -> str | None:
    """`<server>__<tool>` within OpenAI's `^[a-zA-Z0-9_-]{1,64}$`: characters outside it
    become `_`, a long name is cut; None when nothing of the tool's name is left."""
    room = 64 - len(server) - len(SEPARATOR)
    part = UNSAFE.sub("_", tool)[:room]
    if not part.strip("_"):
        return None
    name = f"{server}{SEPARATOR}{part}"
    return name if TOOL_NAME.fullmatch(name) else None


def _validator(schema: dict[str, Any]) -> Validator | None:
    """A validator of the schema's own draft; None when the schema is not a valid one
    (a provider refuses a request with an invalid tool schema)."""
    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
    except (SchemaError, TypeError, ValueError):
        return None
    validator: Validator = cls(schema, registry=Registry())  # $refs only within the schema
    return validator


def _arguments(text: str, validator: Validator) -> tuple[dict[str, Any] | None, str]:
    """The arguments as an object matching the schema, or None and a short reason."""
    if len(text) > MAX_ARGUMENTS_CHARS:
        return None, f"longer than {MAX_ARGUMENTS_CHARS} characters"
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(value, dict):
        return None, "must be a JSON object of the tool's parameters"
    try:
        error = best_match(validator.iter_errors(value))
    except Exception:  # a $ref that does not resolve: the schema, not the model, is wrong
        return None, "the tool's schema cannot be checked"
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path)
        return None, (f"{where}: " if where else "") + error.message[:200]
    return value, ""


def result_text(result: mcp_types.CallToolResult, limit: int) -> str:
    """The result's content as text of at most `limit` characters: text blocks as they
    are, other blocks as a short description, joined by newlines; past the limit, cut
    with a line saying so. Only the part kept is copied."""
    parts: list[str] = []
    kept = total = 0
    blocks = result.content or []
    pieces: Iterable[str] = (
        (_describe(block) for block in blocks)
        if blocks
        else ([json.dumps(result.structured_content)] if result.structured_content else [])
    )
    for index, piece in enumerate(pieces):
        size = len(piece) + (1 if index else 0)
        total += size
        if kept < limit:
            chunk = ("\n" if index else "") + piece[: limit - kept]
            parts.append(chunk[: limit - kept])
            kept += len(parts[-1])
    if total <= limit:
        return "".join(parts)
    marker = f"\n[cut: the tool returned {total} characters; the first ones are shown]"
    text = "".join(parts)
    return text[: max(0, limit - len(marker))] + marker


def _describe(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        kind = "image" if isinstance(block, mcp_types.ImageContent) else "audio"
        data = block.data  # base64: 4 characters for 3 bytes, `=` padding the last
        size = len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))
        return f"[{kind}: {block.mime_type}, {size} bytes, not shown]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[link: {block.uri}]"
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text
        return f"[resource: {resource.uri}, {resource.mime_type or 'binary'}, not shown]"
    return f"[{getattr(block, 'type', 'content')}, not shown]"
