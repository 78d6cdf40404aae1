"""A TCP relay between the code under test and a server, which a test can cut the way a
network does.

`lose_connections()` is what a NAT or a firewall that forgets its connections does: the
server's side of each relayed connection is closed (the server ends that session), while
the client is told nothing; it learns only when it next sends something, which is
answered by closing its connection at once. Until then the client's socket looks open.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit, urlunsplit

LOOPBACK = "127.0.0.1"
CHUNK = 65536


class TcpRelay:
    """`await TcpRelay.start(url)`; `relayed_url` reaches the same server through it."""

    def __init__(self, url: str) -> None:
        self._target = urlsplit(url)
        self._server: asyncio.Server | None = None
        self._upstreams: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._lost = False
        self.relayed_url = url

    @classmethod
    async def start(cls, url: str) -> TcpRelay:
        relay = cls(url)
        relay._server = await asyncio.start_server(relay._relay, LOOPBACK, 0)
        port = relay._server.sockets[0].getsockname()[1]
        user = f"{relay._target.username}@" if relay._target.username else ""
        netloc = f"{user}{LOOPBACK}:{port}"
        relay.relayed_url = urlunsplit(relay._target._replace(netloc=netloc))
        return relay

    def lose_connections(self) -> None:
        """Close the server's side of every connection relayed so far; clients are not told."""
        self._lost = True
        for upstream in self._upstreams:
            upstream.close()

    def restore(self) -> None:
        """Relay new connections again (those lost stay lost)."""
        self._lost = False

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            host, port = self._target.hostname or LOOPBACK, self._target.port or 5432
            up_reader, up_writer = await asyncio.open_connection(host, port)
            self._upstreams.append(up_writer)
            down = asyncio.create_task(self._pump(up_reader, writer, to_client=True))
            try:
                await self._pump(reader, up_writer, to_client=False)
            finally:
                up_writer.close()
                down.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await down
        finally:
            writer.transport.abort()
            self._tasks.discard(task)

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, to_client: bool
    ) -> None:
        """Copy bytes until the source ends; from the client, none once connections are lost
        (the client's first bytes after that end its connection)."""
        with contextlib.suppress(OSError):
            while data := await source.read(CHUNK):
                if self._lost and not to_client:
                    return
                sink.write(data)
                await sink.drain()
        if to_client and self._lost:
            await asyncio.Event().wait()  # the client is told nothing
        sink.close()
