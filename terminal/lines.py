"""The lines typed at the terminal's prompt, read by a daemon thread one at a time when
asked for.

Invariants: the prompt is printed only when a line is asked for, so it follows the
output; a stop of the terminal never waits for Enter (`reading` tells the caller that
the thread is still blocked in its read, which no one can interrupt).
"""

from __future__ import annotations

import asyncio
import threading


class TypedLines:
    """Lines typed at the prompt, read when asked for by a daemon thread."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._asked = threading.Semaphore(0)
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self.reading = False  # the thread is blocked in a read of stdin
        threading.Thread(target=self._read, name="terminal-input", daemon=True).start()

    async def next(self) -> str | None:
        """The next line typed; None at the end of input."""
        self._asked.release()
        return await self._lines.get()

    def _read(self) -> None:
        while True:
            self._asked.acquire()
            self.reading = True
            line = _read_line()
            self.reading = False
            try:
                self._loop.call_soon_threadsafe(self._lines.put_nowait, line)
            except RuntimeError:  # the loop is closed: the terminal has ended
                return
            if line is None:
                return


def _read_line() -> str | None:
    try:
        return input("\n> ")
    except EOFError:
        return None
