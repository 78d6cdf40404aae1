"""Long-lived loops that survive their failures, and a registry that says whether each is
doing its job (what `/healthz` reads).

Invariants:
- `supervise` runs a loop's body again and again until `stop` is set or its task is
  cancelled. An exception of the body never ends the loop: it is logged with the loop's
  name (a WARNING for `StoreUnavailable`, a traceback for anything else) and the next
  attempt waits longer each time in a row (doubling from `Pace.first_retry` up to
  `Pace.max_retry`, with jitter so that workers do not retry in step); a body that
  succeeds resets the wait to `Pace.interval` (or to the delay it returned). Only a
  `BaseException` other than cancellation (a bug or an exit) ends the loop, logged at once.
- Progress means an iteration that ended as expected: it succeeded, or the store was
  unavailable (the dependency's fault, which the store ping of `/healthz` reports; a loop
  waiting for the database is alive). An iteration that raised anything else is not
  progress, so a loop failing every time goes stale.
- A loop is unhealthy (`LoopRegistry.problems`) once it has ended (stopped, cancelled or
  killed), when its current iteration has run longer than `Pace.longest` (stuck), or when
  it made no progress for `Pace.stale_after` seconds (what a healthy loop never exceeds:
  the longest wait between iterations plus the longest iteration, with room to spare).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.domain.errors import StoreUnavailable

log = logging.getLogger(__name__)

Body = Callable[[], Awaitable[float | None]]
"""One iteration of a loop; returns the seconds to wait before the next one (None: the
loop's `Pace.interval`). A body that returns 0 must itself have waited for something."""


@dataclass(frozen=True)
class Pace:
    """How often a loop runs, how long one iteration may take, and how it backs off."""

    interval: float  # the wait after an iteration that went well
    longest: float  # an iteration running longer than this is stuck
    first_retry: float = 1.0  # the wait after a first failure, doubled for each one in a row
    max_retry: float = 30.0  # the longest wait after failures

    def retry_delay(self, failures: int, jitter: float = 1.0) -> float:
        """The wait after `failures` failures in a row (1 or more); `jitter` in [0.5, 1]
        scales it (a random one per attempt)."""
        ceiling = min(self.max_retry, self.first_retry * 2 ** min(failures - 1, 32))
        return ceiling * jitter

    @property
    def stale_after(self) -> float:
        """No progress for longer than this: the loop is not doing its job."""
        return self.longest + 2 * max(self.interval, self.max_retry)


@dataclass
class LoopState:
    """What the registry knows of one loop (times on the registry's clock)."""

    name: str
    pace: Pace
    progress_at: float  # the last iteration that ended as expected (or the start)
    iteration_since: float | None = None  # the running iteration's start, if one runs
    failures: int = 0  # iterations in a row that raised
    last_error: str | None = None
    ended: str | None = None  # why the loop is no longer running

    def problem(self, now: float) -> str | None:
        """None while the loop does its job, else why not (one line)."""
        if self.ended is not None:
            return self.ended
        if self.iteration_since is not None and now - self.iteration_since > self.pace.longest:
            return (
                f"stuck: one iteration has run for {now - self.iteration_since:.0f} s"
                f" (at most {self.pace.longest:g} s expected)"
            )
        if now - self.progress_at > self.pace.stale_after:
            why = f"; last error: {self.last_error}" if self.last_error else ""
            return (
                f"no progress for {now - self.progress_at:.0f} s"
                f" (at most {self.pace.stale_after:g} s expected){why}"
            )
        return None


class LoopRegistry:
    """The process's long-lived loops by name (a loop started again replaces its entry)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._loops: dict[str, LoopState] = {}
        self._suffix = ""
        self._own: set[str] = set()

    def register(self, name: str, pace: Pace) -> LoopState:
        name += self._suffix
        state = LoopState(name, pace, progress_at=self.clock())
        self._loops[name] = state
        self._own.add(name)
        return state

    def part(self, suffix: str) -> LoopRegistry:
        """A view of this registry whose loops are named `name + suffix` (a stored bot's
        "polling:bot2"), so they never replace this one's; `forget` takes them away."""
        view = LoopRegistry(self.clock)
        view._loops = self._loops
        view._suffix = suffix
        return view

    def forget(self) -> None:
        """Take away the loops registered through this view (their part stopped for good:
        an ended loop nobody runs again is no problem)."""
        for name in self._own:
            self._loops.pop(name, None)
        self._own.clear()

    def state(self, name: str) -> LoopState | None:
        return self._loops.get(name)

    def problems(self) -> dict[str, str]:
        """Each unhealthy loop's name and why; empty when all are doing their job."""
        now = self.clock()
        found = {name: state.problem(now) for name, state in self._loops.items()}
        return {name: problem for name, problem in found.items() if problem is not None}

    def names(self) -> list[str]:
        return sorted(self._loops)


async def supervise(
    name: str,
    body: Body,
    pace: Pace,
    loops: LoopRegistry,
    *,
    stop: asyncio.Event | None = None,
) -> None:
    """Run `body` until `stop` is set (returns) or the task is cancelled, surviving its
    failures with back-off; its heartbeats go to `loops` under `name`."""
    state = loops.register(name, pace)
    clock = loops.clock
    try:
        while stop is None or not stop.is_set():
            state.iteration_since = clock()
            try:
                asked = await body()
            except StoreUnavailable as exc:
                delay = _failed(state, pace, f"{type(exc).__name__}: {exc}")
                state.progress_at = clock()  # waiting for the database is doing its job
                log.warning("%s: %s; next attempt in %.1f s", name, exc, delay)
            except Exception as exc:
                delay = _failed(state, pace, f"{type(exc).__name__}: {exc}")
                log.exception("%s failed; next attempt in %.1f s", name, delay)
            else:
                state.failures, state.last_error = 0, None
                state.progress_at = clock()
                delay = pace.interval if asked is None else asked
            state.iteration_since = None
            await _wait(delay, stop)
        state.ended = "stopped"
    except asyncio.CancelledError:
        state.ended = "cancelled"
        log.debug("%s: cancelled", name)  # how every loop ends at shutdown
        raise
    except BaseException as exc:
        state.ended = f"ended by {type(exc).__name__}: {exc}"
        log.critical("%s ended by %s", name, type(exc).__name__, exc_info=True)
        raise


def _failed(state: LoopState, pace: Pace, error: str) -> float:
    state.failures += 1
    state.last_error = error
    return pace.retry_delay(state.failures, random.uniform(0.5, 1.0))


async def _wait(seconds: float, stop: asyncio.Event | None) -> None:
    if stop is None or seconds <= 0:
        await asyncio.sleep(max(seconds, 0))
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
