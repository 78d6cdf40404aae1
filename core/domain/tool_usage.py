"""Tool calls counted per tool, with the usage a reply is charged (`Charge.tools`).

Invariants:
- a reply's tool calls are counted from its `ToolUse`s (`tool_counts`) and travel in its
  `Charge`, so the store adds them to each scope's daily counts in the transaction that
  stores the reply and its tokens: a stored reply is never without its count, a superseded
  or replayed one never counted;
- a count is named by the name the model called (`time__get_current_time`): only names a
  toolbox offered (the configured servers' tools, `knowledge__search`), so the names kept
  are bounded by configuration. A name no toolbox offered (`ToolFailure.UNKNOWN_TOOL`) or
  outside `TOOL_NAME` counts as `UNKNOWN`, never under its own name: whatever a model
  invents, it adds to one row;
- `failed` of a count's `calls` gave no result (any `ToolFailure`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.domain.tool_uses import server_tool
from core.domain.tools import SEPARATOR, TOOL_NAME, ToolFailure, ToolUse

UNKNOWN = "unknown"
"""The count of calls to tools no toolbox offered; no offered name is this (every one is
`<server>__<tool>`)."""


@dataclass(frozen=True, slots=True)
class ToolCount:
    """One tool's calls (in one reply, or added up over days); `failed` of them gave no result."""

    tool: str
    calls: int
    failed: int = 0


@dataclass(frozen=True, slots=True)
class ToolCalls:
    """A scope's tool calls by tool on one UTC day and over its month up to that day, each
    `listed`; empty when none was made."""

    today: tuple[ToolCount, ...] = ()
    month: tuple[ToolCount, ...] = ()


def counted_name(use: ToolUse) -> str:
    """The name `use` is counted under: its own when a toolbox offered it, else `UNKNOWN`."""
    if use.failure is ToolFailure.UNKNOWN_TOOL or not TOOL_NAME.fullmatch(use.name):
        return UNKNOWN
    return use.name


def tool_counts(uses: Sequence[ToolUse]) -> tuple[ToolCount, ...]:
    """The calls of `uses` by counted name (`counted_name`), `listed`."""
    calls: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for use in uses:
        name = counted_name(use)
        calls[name] += 1
        failed[name] += 0 if use.ok else 1
    return listed(ToolCount(name, calls[name], failed[name]) for name in calls)


def listed(counts: Iterable[ToolCount]) -> tuple[ToolCount, ...]:
    """`counts` in the order they are shown: by name, code point by code point (whatever
    a database's collation would do), `UNKNOWN` last."""
    return tuple(sorted(counts, key=lambda count: (count.tool == UNKNOWN, count.tool)))


def shown_tool(name: str) -> str:
    """A counted name as a person reads it: `time · get_current_time` (a server's name
    never holds the separator); `UNKNOWN` and other names as they are."""
    server, separator, tool = name.partition(SEPARATOR)
    return server_tool(server, tool) if separator and server and tool else name
