"""Serve an aiohttp app on 127.0.0.1: the one start/stop used by every fake server.

Invariant: the server listens on the loopback interface only (a fake never faces the
network); asking for port 0 binds a free port, and `port` is the real one once `start`
returns. `stop` is idempotent and gives handlers still running one second to finish, so a
fake that wakes its sleeping handlers on stop never holds the test up.
`until_stopped` is how a standalone fake (`python -m fakes.…`) waits for its end.
"""

from __future__ import annotations

import asyncio
import signal
from types import TracebackType

from aiohttp import web

LOOPBACK = "127.0.0.1"
BACKLOG = 4096  # the benchmark opens hundreds of connections at once
SHUTDOWN_SECONDS = 1.0


class LocalServer:
    """One aiohttp `Application` served on 127.0.0.1; `async with` starts and stops it."""

    def __init__(self, app: web.Application, *, port: int = 0) -> None:
        self.app = app
        self.host = LOOPBACK
        self.port = port
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`, without a trailing slash."""
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def start(self) -> None:
        """Listen; from now on `port` is the bound port (also when 0 was asked for)."""
        if self._runner is not None:
            raise RuntimeError("the server is already running")
        runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=SHUTDOWN_SECONDS)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port, backlog=BACKLOG).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]

    async def stop(self) -> None:
        """Close the listener and the open connections; a second call does nothing."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> LocalServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()


async def until_stopped() -> None:
    """Return when SIGTERM or SIGINT arrives, so a standalone fake stops its server and
    exits 0 either way. SIGTERM is what stops a background job (`nohup make test &`
    starts its children with SIGINT ignored); an ignored SIGINT stays ignored."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = [signal.SIGTERM]
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signals.append(signal.SIGINT)
    for signum in signals:
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
