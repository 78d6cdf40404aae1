"""Start-up failures and signals, shared by every long-running entry point."""

from __future__ import annotations

import asyncio
import contextlib
import signal


class StartupError(Exception):
    """The process cannot start as configured; the message says why in one line and
    names the setting to look at. Entry points print it and exit with code 2."""


def cannot_listen(host: str, port: int, error: OSError) -> StartupError:
    """The HTTP server could not bind API_HOST:API_PORT (in use, not an address here)."""
    reason = error.strerror or str(error)
    return StartupError(f"API_HOST/API_PORT: cannot listen on {host}:{port} ({reason})")


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT, for a clean shutdown of a long-running process."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):  # platforms without signal handlers
            loop.add_signal_handler(sig, stop.set)
    return stop
