"""The terminal (`consultation-bot console`, `python -m bot console`): the runtime it runs
on, opened per session and closed at its end.

Same settings, store and engine as the bot; the model endpoint is checked once the
runtime is open, so its warnings reach stderr before the first prompt. `terminal.repl`
runs the prompt with what this module opens.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.runtime import check_model_endpoint, open_runtime
from app.settings import Settings
from terminal.repl import TerminalRuntime, run_terminal


async def serve_terminal(settings: Settings) -> int:
    """Run the terminal until it ends; the exit code."""

    @asynccontextmanager
    async def open_engine() -> AsyncIterator[TerminalRuntime]:
        async with open_runtime(settings) as runtime:
            await check_model_endpoint(runtime)
            yield TerminalRuntime(runtime.engine, runtime.intake)

    return await run_terminal(open_engine, settings)
