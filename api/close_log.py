"""Connections the HTTP server closes on its own, logged as counts, not one line each.

Invariant: for each reason (past the connection cap, headers too slow, body too slow) at
most one line is logged per `INTERVAL` seconds however many connections are closed: the
first close is logged at once, the ones after it are counted and logged as one line when
the interval ends, so a flood of clients cannot flood the log.
"""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("api.server")

INTERVAL = 10.0


class CloseTally:
    """Closes for one reason; `note` one, `stop` to log what is still counted."""

    def __init__(self, reason: str, *, level: int = logging.INFO, interval: float = INTERVAL):
        self.reason = reason
        self.level = level
        self.interval = interval
        self.count = 0
        self._due: asyncio.TimerHandle | None = None

    def note(self) -> None:
        self.count += 1
        if self._due is None:  # the first close of a quiet spell is told at once
            self._report()

    def stop(self) -> None:
        if self._due is not None:
            self._due.cancel()
            self._due = None
        if self.count:
            self._log()

    def _report(self) -> None:
        self._log()
        self._due = asyncio.get_running_loop().call_later(self.interval, self._interval_ended)

    def _interval_ended(self) -> None:
        self._due = None
        if self.count:
            self._report()

    def _log(self) -> None:
        log.log(
            self.level,
            "closed %d connection%s %s in the last %.0f s",
            self.count,
            "" if self.count == 1 else "s",
            self.reason,
            self.interval,
        )
        self.count = 0
