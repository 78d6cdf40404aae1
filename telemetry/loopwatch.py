"""How long the event loop was kept from running: the stall every chat feels at once.

A watcher task asks to wake every `interval` seconds and records how late it woke
(`consult_event_loop_lag_seconds`). Work that holds the loop (a long synchronous
computation, a blocking call) shows up as lag whatever it was; a stall past
`warn_after` is logged once per occurrence so an operator sees it without metrics.
Waking 100 times a second costs a few microseconds each: negligible next to a round.
The watcher is a supervised loop (`telemetry.supervision`): a failure to record is
logged and recording goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from telemetry.supervision import LoopRegistry, Pace, supervise

log = logging.getLogger(__name__)

LAG_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


LONGEST = 1.0  # one look at the clock and one record: it never waits
MAX_RETRY = 30.0


async def watch_event_loop(
    record: Callable[[float], None],
    *,
    interval: float = 0.01,
    warn_after: float = 0.25,
    loops: LoopRegistry | None = None,
) -> None:
    """Record the loop's lag every `interval` seconds until cancelled (a failure to record
    is logged, and recording goes on); reports to `loops` as "event loop watcher"."""
    loop = asyncio.get_running_loop()
    asked: float | None = None  # when the supervisor's sleep should have ended

    async def once() -> float:
        nonlocal asked
        now = loop.time()
        lag = None if asked is None else max(now - asked, 0.0)
        asked = now + interval  # the supervisor sleeps `interval` as soon as this returns
        if lag is None:
            return interval
        if lag >= warn_after:
            log.warning("the event loop was blocked for %.0f ms", lag * 1000)
        try:
            record(lag)
        except Exception:
            asked = None  # the wait after a failure is longer: not lag
            raise
        return interval

    pace = Pace(interval, LONGEST, max_retry=MAX_RETRY)
    await supervise("event loop watcher", once, pace, loops or LoopRegistry())
