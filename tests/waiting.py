"""Waiting in tests for a condition nothing signals: looked at often, for a bounded time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

WAIT = 20.0


async def until(check: Callable[[], bool], what: str, *, seconds: float = WAIT) -> None:
    """Wait until `check()` holds (looked at every 20 ms, for `seconds` at most); a
    failure names `what` never happened."""
    try:
        async with asyncio.timeout(seconds):
            while not check():  # noqa: ASYNC110 - nothing signals these conditions
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None
