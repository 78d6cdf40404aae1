"""The event-loop watcher reports a stall as lag, and a running process exports it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import pytest

from telemetry.loopwatch import watch_event_loop
from telemetry.metrics import Metrics
from telemetry.supervision import LoopRegistry


async def test_a_blocked_loop_is_recorded_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Holding the loop for 0.3 s shows as a lag of at least that, with one warning."""
    lags: list[float] = []
    woke = asyncio.Event()

    def record(lag: float) -> None:
        lags.append(lag)
        woke.set()

    watcher = asyncio.create_task(watch_event_loop(record, interval=0.01, warn_after=0.25))
    try:
        await woke.wait()  # the watcher is asleep on its timer now
        woke.clear()
        with caplog.at_level(logging.WARNING, logger="api.loopwatch"):
            time.sleep(0.3)  # noqa: ASYNC251 - the blocking call under test
            await woke.wait()
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    assert max(lags) >= 0.29 - 0.01
    assert [r.getMessage() for r in caplog.records if "blocked" in r.getMessage()]


async def test_the_watcher_survives_a_failure_to_record(caplog: pytest.LogCaptureFixture) -> None:
    """A recorder that raises once: logged with the watcher's name, and recording goes on."""
    lags: list[float] = []
    recorded = asyncio.Event()
    loops = LoopRegistry()

    def record(lag: float) -> None:
        if not lags:
            lags.append(-1.0)
            raise RuntimeError("a broken metric")
        lags.append(lag)
        recorded.set()

    watcher = asyncio.create_task(watch_event_loop(record, interval=0.001, loops=loops))
    try:
        await asyncio.wait_for(recorded.wait(), 20)
        assert not watcher.done()
        assert loops.problems() == {}
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    [failure] = [r for r in caplog.records if r.exc_info]
    assert failure.getMessage().startswith("event loop watcher failed")


def test_the_lag_is_exported_as_a_histogram() -> None:
    """The metric is in the exposition text with its buckets."""
    metrics = Metrics()
    metrics.loop_lag.observe(0.06)
    body, _ = metrics.render()
    text = body.decode()
    assert 'consult_event_loop_lag_seconds_bucket{le="0.05"} 0.0' in text
    assert 'consult_event_loop_lag_seconds_bucket{le="0.075"} 1.0' in text
