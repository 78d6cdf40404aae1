"""The terminal's signals: Ctrl-C (SIGINT) while a command or a reply runs stops that one
reply and returns to the prompt; Ctrl-C at the prompt, and SIGTERM at any time, stop the
terminal (`stop`).

Invariant: an interrupted turn ends as a cancelled one does anywhere (the message being
answered stays saved for /retry, as after a model error), and a stop of the whole terminal
arriving at the same moment is never swallowed by the interrupt of its turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable

INTERRUPTED = "[stopped by Ctrl-C; your message is saved: /retry answers it again]"


class Interrupts:
    """Signal handlers on the running loop; `run` runs one turn under them."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()  # set when the terminal is to end
        self._turn: asyncio.Future[None] | None = None
        self._interrupted = False
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError):  # platforms without signal handlers
            loop.add_signal_handler(signal.SIGTERM, self.stop.set)
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)

    def _on_sigint(self) -> None:
        if self._turn is not None and not self._turn.done():
            self._interrupted = True
            self._turn.cancel()
        else:
            self.stop.set()

    async def run(self, turn: Awaitable[None]) -> bool:
        """Await `turn`; False when Ctrl-C stopped it. A cancellation of the caller
        (the terminal stopping) propagates as usual."""
        self._interrupted = False
        self._turn = asyncio.ensure_future(turn)
        try:
            await self._turn
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not self._interrupted or (current is not None and current.cancelling()):
                raise
            return False
        finally:
            self._turn = None
        return True
