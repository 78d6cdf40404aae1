"""How long the event loop was kept from running: the stall every chat feels at once.

A watcher task asks to wake every `interval` seconds and records how late it woke
(`consult_event_loop_lag_seconds`). Work that holds the loop (a long synchronous
computation, a blocking call) shows up as lag whatever it was; a stall past
`warn_after` is logged once per occurrence so an operator sees it without metrics.
Waking 100 times a second costs a few microseconds each: negligible next to a round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

LAG_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


async def watch_event_loop(
    record: Callable[[float], None], *, interval: float = 0.01, warn_after: float = 0.25
) -> None:
    """Record the loop's lag every `interval` seconds until cancelled."""
    loop = asyncio.get_running_loop()
    while True:
        asked = loop.time() + interval
        await asyncio.sleep(interval)
        lag = max(loop.time() - asked, 0.0)
        record(lag)
        if lag >= warn_after:
            log.warning("the event loop was blocked for %.0f ms", lag * 1000)
