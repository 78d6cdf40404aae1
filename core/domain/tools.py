"""Tools the expert may call while it answers: what the model is offered, what it asked
for, and what running it gave.

Invariants: a tool's `name` is what the model sees and calls, `<server>__<tool>` within
`TOOL_NAME` (OpenAI's rule for function names), unique in one `Toolbox`; a `ToolUse` is
bounded (its arguments and result are cut by whoever ran it) and says in `error` what went
wrong in words the model can read, so a failed tool is an answer, never an exception. The
`Toolbox` port is implemented at the edge (`tools.toolbox`, MCP servers) and in the engine
(the knowledge base's search); `core` sees only these types.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What OpenAI-compatible APIs accept as a function name."""

SEPARATOR = "__"
"""Between a server's name and its tool's in the name the model sees."""


class ToolFailure(enum.StrEnum):
    """Why a tool call gave no result (for metrics; `ToolUse.error` says it in words)."""

    TIMEOUT = "timeout"
    INVALID_ARGUMENTS = "invalid_arguments"
    UNKNOWN_TOOL = "unknown_tool"
    UNAVAILABLE = "unavailable"  # the server is gone or not started
    FAILED = "failed"  # the tool itself reported an error


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as the model is offered it."""

    name: str  # `<server>__<tool>`, within TOOL_NAME
    server: str  # the MCP server's configured name ("knowledge" for the knowledge base)
    tool: str  # the tool's own name at its server
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)  # JSON schema of the arguments

    def as_openai(self) -> dict[str, Any]:
        """The `tools` entry of a chat completion request."""
        parameters = self.parameters or {"type": "object", "properties": {}}
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asked for in a reply (a streamed `tool_calls` entry, joined)."""

    id: str
    name: str
    arguments: str  # the JSON text the model wrote; not yet validated


@dataclass(frozen=True, slots=True)
class ToolUse:
    """One tool call run for a turn: what the model was sent back, and what the transcript,
    the exports, the API (`toolCalls`) and the answer's "Looked up" line show."""

    name: str  # as the model called it
    server: str
    tool: str
    arguments: str  # JSON text, bounded
    result: str = ""  # bounded; empty when it failed
    error: str | None = None  # short, for the model and the person; None when it answered
    failure: ToolFailure | None = None
    ms: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


OnToolStart = Callable[[ToolSpec], Awaitable[None]]
"""Called when a tool the model asked for starts running: the edge shows it ("Looking up:
time · get_current_time…") until the reply's text goes on."""


class Toolbox(Protocol):
    """Tools a consultation may call (`tools.toolbox.McpToolbox`, the knowledge base's)."""

    def specs(self) -> Sequence[ToolSpec]:
        """The tools offered now (a server that went away offers none)."""
        ...

    async def call(self, call: ToolCall) -> ToolUse:
        """Run one call, bounded in time and in the size of its result; never raises for a
        tool's own failure (timeout, invalid arguments, server gone): the `ToolUse` says it."""
        ...


@dataclass(frozen=True, slots=True)
class ToolServerStatus:
    """Where one configured tool server stands, for `/healthz` and the console's dashboard."""

    name: str
    # "starting", "ready", "restarting" (it died; started again after a back-off), "failed"
    state: str
    tools: int = 0  # the tools it offers the model (after MCP_TOOLS_ALLOW)
    error: str | None = None  # the last failure, one line
