"""Waiting in tests for a condition nothing signals: looked at often, for a bounded time."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

WAIT = 20.0


async def until(
    check: Callable[[], bool | Awaitable[bool]], what: str, *, seconds: float = WAIT
) -> None:
    """Wait until `check()` holds (looked at every 20 ms, for `seconds` at most; a check
    may be a coroutine function, e.g. a query); a failure names `what` never happened."""

    async def holds() -> bool:
        result = check()
        return bool(await result) if inspect.isawaitable(result) else bool(result)

    try:
        async with asyncio.timeout(seconds):
            while not await holds():  # noqa: ASYNC110 - nothing signals these conditions
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None
