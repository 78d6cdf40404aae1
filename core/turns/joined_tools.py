"""Several toolboxes offered as one: the MCP servers' and the knowledge base's.

Invariants: the names offered are unique (a name a toolbox before it already offers is
left out, and logged once per name); a call goes to the toolbox offering its name when
the turn began; a name none offers is a `ToolUse` saying so (UNKNOWN_TOOL), never an
exception.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from core.domain.tools import Toolbox, ToolCall, ToolFailure, ToolSpec, ToolUse

log = logging.getLogger(__name__)

_warned: set[str] = set()  # names already logged as offered twice


class JoinedToolbox:
    """A `core.domain.tools.Toolbox` over `toolboxes`, their tools read once, now."""

    def __init__(self, toolboxes: Sequence[Toolbox]) -> None:
        self._specs: list[ToolSpec] = []
        self._routes: dict[str, Toolbox] = {}
        for toolbox in toolboxes:
            for spec in toolbox.specs():
                if spec.name in self._routes:
                    if spec.name not in _warned:
                        _warned.add(spec.name)
                        log.warning("two toolboxes offer %s; the first one is kept", spec.name)
                    continue
                self._routes[spec.name] = toolbox
                self._specs.append(spec)

    def specs(self) -> Sequence[ToolSpec]:
        return tuple(self._specs)

    async def call(self, call: ToolCall) -> ToolUse:
        toolbox = self._routes.get(call.name)
        if toolbox is None:
            return ToolUse(
                name=call.name[:64],
                server="",
                tool=call.name[:64],
                arguments=call.arguments[:2000],
                error=f"no tool named {call.name[:64]!r}",
                failure=ToolFailure.UNKNOWN_TOOL,
            )
        return await toolbox.call(call)
