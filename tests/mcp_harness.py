"""MCP tool servers for tests: the fake (`fakes.mcp_server`) over stdio or streamable
HTTP, `mcp-server-time` from PyPI, and a started `McpToolbox` over any of them.

Every server is a real child process; each context manager stops what it started, and
`running_toolbox` closes the toolbox (killing its stdio children) whatever the test did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tools.config import tools_config
from tools.toolbox import McpToolbox

ROOT = Path(__file__).resolve().parents[1]


def fake_stdio(log: Path | None = None, **env: str) -> dict[str, Any]:
    """MCP_SERVERS' entry for the fake over stdio (`log`: its FAKE_MCP_LOG, a line per call)."""
    if log is not None:
        env["FAKE_MCP_LOG"] = str(log)
    entry: dict[str, Any] = {
        "command": sys.executable,
        "args": ["-m", "fakes.mcp_server", "--stdio"],
        "cwd": str(ROOT),
    }
    if env:
        entry["env"] = env
    return entry


def time_server() -> dict[str, Any]:
    """MCP_SERVERS' entry for PyPI's `mcp-server-time`, run from this interpreter."""
    return {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone=UTC"]}


@contextlib.asynccontextmanager
async def fake_http(port: int = 0) -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    """The fake over streamable HTTP on 127.0.0.1 (`port` 0: a free one): its URL and
    process, terminated (then killed) at the end."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "fakes.mcp_server",
        "--http",
        "--port",
        str(port),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(20):
            url = (await process.stdout.readline()).decode().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url, process
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                async with asyncio.timeout(5):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


@contextlib.asynccontextmanager
async def running_toolbox(
    servers: dict[str, Any],
    *,
    allow: str = "",
    call_seconds: float = 20.0,
    max_chars: int = 8000,
    first_retry: float = 0.1,
    start_seconds: float = 20.0,
    ping_every: float = 30.0,
) -> AsyncIterator[McpToolbox]:
    """A started toolbox over `servers` (MCP_SERVERS as a dict), closed at the end."""
    config = tools_config(
        json.dumps(servers), allow, timeout_seconds=call_seconds, result_max_chars=max_chars
    )
    toolbox = McpToolbox(
        config,
        first_retry=first_retry,
        longest_retry=2.0,
        start_seconds=start_seconds,
        ping_every=ping_every,
    )
    try:
        await toolbox.start()
        yield toolbox
    finally:
        await toolbox.close()
