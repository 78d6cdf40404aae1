"""Log records while the terminal prints a reply: held, then written after it.

The terminal shows the conversation on stdout and warnings on stderr; both
reach the same screen, so a warning written while a reply streams lands inside it,
glued to the model's last word. `HeldLogs` takes the root logger's handlers' place:
outside `held()` a record goes straight to them; inside, it waits and is written once
the reply and its state line are printed, before the next prompt.

Invariant: every record reaches the handlers it would have reached (their filters, such
as the secrets' redaction, apply), in order; at most `MAX_HELD` wait, the rest are counted
in one line, so a flood of records cannot grow memory without bound.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

MAX_HELD = 200


class HeldLogs(logging.Handler):
    """Forwards records to `targets`, holding them while `held()` is active."""

    def __init__(self, targets: list[logging.Handler]) -> None:
        super().__init__()
        self._targets = targets
        self._held: list[logging.LogRecord] = []
        self._dropped = 0
        self._holding = False

    @classmethod
    def install(cls) -> HeldLogs:
        """Stand in for the root logger's handlers (those `configure_logging` set up)."""
        root = logging.getLogger()
        handler = cls(list(root.handlers))
        root.handlers = [handler]
        return handler

    def emit(self, record: logging.LogRecord) -> None:
        if not self._holding:
            self._forward(record)
        elif len(self._held) < MAX_HELD:
            self._held.append(record)
        else:
            self._dropped += 1

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the records logged inside the block; write them when it ends."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
            sys.stdout.flush()  # what was printed comes first, also into a pipe
            held, self._held = self._held, []
            for record in held:
                self._forward(record)
            if self._dropped:
                dropped, self._dropped = self._dropped, 0
                self._forward(
                    logging.LogRecord(
                        __name__, logging.WARNING, __file__, 0,
                        "%d more log records were left out", (dropped,), None,
                    )
                )  # fmt: skip

    def _forward(self, record: logging.LogRecord) -> None:
        for target in self._targets:
            if record.levelno >= target.level:
                target.handle(record)
