"""A `Toolbox` for the engine's tests: a clock, a tool that waits until the test lets it
go, one that fails, one that answers whatever it is told to. Real code, no mocks: every
call is recorded (`calls`), and how many ran at once (`running`, `peak`).

The waiting tool (`slow__wait`) is bounded as a real toolbox bounds its tools: it gives
up after `timeout` seconds with a TIMEOUT the model reads; tests release it (`release`)
long before."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from core.domain.tools import ToolCall, ToolFailure, ToolSpec, ToolUse

NOW = "2026-11-29T12:00:00+00:00"

CLOCK = ToolSpec(
    "clock__now",
    "clock",
    "now",
    "The time now",
    {"type": "object", "properties": {"tz": {"type": "string"}}},
)
SLOW = ToolSpec("slow__wait", "slow", "wait", "Waits", {"type": "object", "properties": {}})
FAILING = ToolSpec("bad__fail", "bad", "fail", "Fails", {"type": "object", "properties": {}})
SAYS = ToolSpec("echo__say", "echo", "say", "Says what it is told", {"type": "object"})


class Tools:
    """The test toolbox (see the module); `said` is what `echo__say` answers."""

    def __init__(self, *, timeout: float = 30.0) -> None:
        self.calls: list[ToolCall] = []
        self.running = 0
        self.peak = 0
        self.timeout = timeout
        self.said = "said"
        self._gate = asyncio.Event()

    def specs(self) -> Sequence[ToolSpec]:
        return (CLOCK, SLOW, FAILING, SAYS)

    def release(self) -> None:
        """Let every waiting call (and later ones) go."""
        self._gate.set()

    async def call(self, call: ToolCall) -> ToolUse:
        self.calls.append(call)
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            return await self._answer(call)
        finally:
            self.running -= 1

    async def _answer(self, call: ToolCall) -> ToolUse:
        arguments = json.loads(call.arguments or "{}")
        spec = {s.name: s for s in self.specs()}[call.name]
        use = ToolUse(call.name, spec.server, spec.tool, call.arguments)
        if call.name == CLOCK.name:
            return _with(use, result=f"{NOW} in {arguments.get('tz', 'UTC')}")
        if call.name == SLOW.name:
            try:
                async with asyncio.timeout(self.timeout):
                    await self._gate.wait()
            except TimeoutError:
                return _with(use, error="timed out", failure=ToolFailure.TIMEOUT)
            return _with(use, result="waited")
        if call.name == FAILING.name:
            return _with(use, error="the server is gone", failure=ToolFailure.UNAVAILABLE)
        return _with(use, result=self.said)


def _with(
    use: ToolUse,
    *,
    result: str = "",
    error: str | None = None,
    failure: ToolFailure | None = None,
) -> ToolUse:
    return ToolUse(use.name, use.server, use.tool, use.arguments, result, error, failure, use.ms)
