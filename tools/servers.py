"""One connection per configured MCP server, kept up for as long as the toolbox runs.

A stdio server is a child process of this one (in its own process group, so closing
kills it and anything it started); an HTTP server is a streamable HTTP endpoint. Each
connection lives in one supervising task that enters the SDK's transport and
`ClientSession` (their anyio task groups must be entered and left by the same task),
runs `initialize` and `tools/list`, publishes the session, and waits until the
connection ends: the child exits, the endpoint stops answering, or the toolbox closes.
Then it starts the server again after a back-off (1 s, doubling up to 60 s).

Invariants: calls run on the published session from any task, concurrently (the SDK
correlates them by id), so a hanging call never holds another; a server that is not
ready raises `ServerGone` at once, never waits; a failure to start or a death is logged
once at WARNING until the server is ready again (the retries log at DEBUG), so a missing
command does not fill the log; `close` leaves no child process running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anyio
from mcp import types as mcp_types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from tools.config import McpServerConfig

log = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 1.0
LONGEST_RETRY_SECONDS = 60.0
START_SECONDS = 30.0
"""`initialize` and `tools/list` together, each start."""
STOP_SECONDS = 8.0
"""The SDK's stop of a stdio child: 0.5 s to flush, 2 s after closing its stdin, 2 s after
SIGTERM, 2 s after SIGKILL."""
PING_EVERY_SECONDS = 30.0
"""A ready server is pinged this often while no call runs, so its state stays true while
nobody calls it."""
PING_SECONDS = 5.0
MAX_TOOLS = 128
"""Tools taken from one server (OpenAI takes 128 in one request)."""
MAX_LIST_PAGES = 10
MAX_EVENT_BYTES = 8 * 1024 * 1024
"""One message from an HTTP server (a larger one fails that call): a 1 MB text result is
sent twice (as text and as structured content) by servers built on the SDK."""
CLOSED = "the server closed the connection"
CLIENT_INFO = mcp_types.Implementation(name="consultation-bot", version="1")


class ServerGone(Exception):
    """The server is not connected now (starting, restarting, or failed)."""


@dataclass(frozen=True, slots=True)
class ListedTool:
    """A tool as its server lists it."""

    name: str
    description: str
    schema: dict[str, Any]


class _WatchedStream:
    """The transport's read stream, telling when it ends (the session's receive loop
    closes it on end of stream, on a transport failure and on exit)."""

    def __init__(self, inner: Any, ended: asyncio.Event) -> None:
        self._inner = inner
        self.ended = ended

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.ended.set()
            raise
        return item

    async def aclose(self) -> None:
        self.ended.set()
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


class McpServer:
    """One configured server: its state, its tools while it is ready, and its calls."""

    def __init__(
        self,
        config: McpServerConfig,
        *,
        first_retry: float = FIRST_RETRY_SECONDS,
        longest_retry: float = LONGEST_RETRY_SECONDS,
        start_seconds: float = START_SECONDS,
        ping_every: float = PING_EVERY_SECONDS,
    ) -> None:
        self.config = config
        self._ping_every = ping_every
        self.state = "starting"
        self.error: str | None = None
        self.tools: tuple[ListedTool, ...] = ()  # the last listing, kept while it is down
        self._first_retry = first_retry
        self._longest_retry = longest_retry
        self._start_seconds = start_seconds
        self._session: ClientSession | None = None
        self._down: asyncio.Event | None = None  # set when the session's connection is down
        self._why: str | None = None  # why it is down, when not because its stream ended
        self._up = False  # the current connection got ready
        self._calls = 0  # calls in flight: a server busy with one is not pinged
        self._task: asyncio.Task[None] | None = None
        self._settled = asyncio.Event()  # the first start ended, ready or failed
        self._told = False  # a failure was logged since it was last ready

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def ready(self) -> bool:
        return self._session is not None

    def start(self) -> None:
        """Start the supervising task; `wait_started` waits for its first start."""
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp server {self.name}")

    async def wait_started(self) -> None:
        """Wait until the first start is ready or failed: at most the start's bound and
        the time to stop a child that did not answer in it."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._start_seconds + STOP_SECONDS):
                await self._settled.wait()

    async def close(self) -> None:
        """End the connection; a stdio child is stopped (stdin closed, then SIGTERM, then
        SIGKILL to its process group, each after a bounded wait)."""
        task, self._task = self._task, None
        self._session = None
        if task is None:
            return
        # Cancelled once, the task stops its child (the SDK shields that, each wait
        # bounded) and ends its HTTP session; a second cancel cuts a DELETE to an endpoint
        # that no longer answers.
        for _ in range(2):
            task.cancel()
            await asyncio.wait({task}, timeout=STOP_SECONDS)
            if task.done():
                break
        if not task.done():
            log.warning("tool server %s: still stopping after %g s", self.name, 2 * STOP_SECONDS)
        elif not task.cancelled() and task.exception() is not None:
            log.warning("tool server %s: stopped with %r", self.name, task.exception())

    async def call(
        self, tool: str, arguments: dict[str, Any], seconds: float
    ) -> mcp_types.CallToolResult:
        """Call `tool` within `seconds` (TimeoutError past it: the SDK tells the
        server the call is cancelled); `ServerGone` when the server is not connected or
        the connection ends under the call."""
        session, down = self._session, self._down
        if session is None or down is None:
            raise ServerGone(self.error or self.state)
        self._calls += 1
        try:
            with anyio.fail_after(seconds):
                return await session.call_tool(tool, arguments)
        except MCPError as exc:
            if exc.error.code == mcp_types.REQUEST_TIMEOUT:
                raise TimeoutError from None
            # The connection ended under the call (a stdio child's stdout ends before the
            # calls in flight are failed, so `down` is set by now), or an HTTP server
            # stopped answering: the SDK says CONNECTION_CLOSED also for one response it
            # could not read, and an HTTP session the server forgot fails every call, so
            # a ping tells a dead connection from one bad answer.
            if not down.is_set() and not await _alive(session):
                self._lose(down, f"no answer to a ping after: {exc.error.message}"[:300])
            if down.is_set():
                if self._session is session:  # down now, before the supervisor sees it
                    self._session, self.state = None, "restarting"
                    self.error = self._why or CLOSED
                raise ServerGone(exc.error.message) from None
            raise
        finally:
            self._calls -= 1

    def _lose(self, down: asyncio.Event, why: str) -> None:
        if not down.is_set():
            self._why = why
            down.set()

    async def _supervise(self) -> None:
        delay = self._first_retry
        while True:
            began = time.monotonic()
            self._up, self._why = False, None
            try:
                await self._connect_once()
                reason = self._why or CLOSED
            except Exception as exc:
                reason = _reason(exc, self._start_seconds)
            was_ready = self._up
            self._session = self._down = None
            self.error = reason
            if time.monotonic() - began >= self._longest_retry and was_ready:
                delay = self._first_retry  # it ran a good while: this is a new trouble
            self.state = "restarting" if was_ready else "failed"
            self._settled.set()
            self._tell(was_ready, reason, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._longest_retry)

    async def _connect_once(self) -> None:
        """Connect, list, publish the session, and return when the connection is down:
        its stream ended, a failed call's ping got no answer, or a periodic ping did not."""
        down = asyncio.Event()
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport())
            session = await stack.enter_async_context(
                ClientSession(_WatchedStream(read, down), write, client_info=CLIENT_INFO)
            )
            with anyio.fail_after(self._start_seconds):
                await session.initialize()
                tools = await _list_tools(session)
            self.tools = tools
            self.state, self.error, self._told = "ready", None, False
            self._session, self._down, self._up = session, down, True
            self._settled.set()
            log.info("tool server %s ready: %d tools", self.name, len(tools))
            while not down.is_set():
                with anyio.move_on_after(self._ping_every):
                    await down.wait()
                # A server may answer nothing while a tool of its blocks it: not pinged then.
                if not down.is_set() and not self._calls and not await _alive(session):
                    self._lose(down, "no answer to a ping")

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        config = self.config
        if config.command is not None:
            parameters = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=dict(config.env) or None,
                cwd=config.cwd,
            )
            async with stdio_client(parameters) as streams:
                yield streams
            return
        assert config.url is not None
        async with (
            create_mcp_http_client(headers=dict(config.headers) or None) as http,
            streamable_http_client(
                config.url, http_client=http, max_sse_event_size=MAX_EVENT_BYTES
            ) as streams,
        ):
            yield streams

    def _tell(self, was_ready: bool, reason: str, delay: float) -> None:
        """Log a failure once until the server is ready again; retries at DEBUG."""
        if self._told:
            log.debug("tool server %s: still down (%s); next try in %g s", self.name, reason, delay)
            return
        self._told = True
        what = "stopped" if was_ready else "cannot start"
        log.warning(
            "tool server %s (%s) %s: %s; the bot runs without its tools and tries again "
            "in %g s, backing off to %g s",
            self.name,
            self.config.describe(),
            what,
            reason,
            delay,
            self._longest_retry,
        )


async def _alive(session: ClientSession) -> bool:
    """Whether the server answers a ping within `PING_SECONDS`."""
    try:
        with anyio.fail_after(PING_SECONDS):
            await session.send_ping()
    except Exception:
        return False
    return True


async def _list_tools(session: ClientSession) -> tuple[ListedTool, ...]:
    """Every page of `tools/list`, up to `MAX_TOOLS` tools and `MAX_LIST_PAGES` pages."""
    found: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        for tool in page.tools:
            schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
            found.append(ListedTool(tool.name, tool.description or "", dict(schema)))
        cursor = page.next_cursor
        if not cursor or len(found) >= MAX_TOOLS:
            break
    if len(found) > MAX_TOOLS:
        log.warning("a tool server lists %d tools; the first %d are used", len(found), MAX_TOOLS)
    return tuple(found[:MAX_TOOLS])


def _reason(exc: BaseException, start_seconds: float) -> str:
    """One line saying why a connection failed (the first leaf of an exception group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return f"no answer to initialize and tools/list within {start_seconds:g} s"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__
