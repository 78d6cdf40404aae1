"""Optional modules that libraries import when they find them installed, kept out of the
processes that have no use for them.

The MCP SDK (`mcp`, needed for MCP_SERVERS) brings `click` (through uvicorn) and
`cryptography` (through PyJWT). Installed, they are imported by libraries every process
loads: httpx (python-telegram-bot's HTTP client) imports its command line with click, rich
and pygments when all three are there (the evaluator brings the other two), and
python-telegram-bot imports `cryptography` for Telegram Passport data. Together about
14 MB and 100 ms for every process, tool servers or not. This product runs no httpx
command line and reads no Passport data, so a `None` entry in `sys.modules` makes those
imports fail as they did before the SDK was installed, and each library takes its own
fallback. `cryptography` stays importable in a process with tool servers: the SDK imports it,
and in any process once a stored bot's token is sealed or opened (`admit`, by
`app.bot_secrets`): a deployment without added bots never loads it.

Invariant: called before the first import of `telegram` or `httpx` (the entry points call
it once the settings are read, and import the edges only after), and never removes a
module that is already loaded; `admit` takes away only its own marker, so a library that
already looked keeps the fallback it took.
"""

from __future__ import annotations

import sys

ALWAYS_UNUSED = ("httpx._main",)
UNUSED_WITHOUT_TOOLS = ("cryptography",)


def leave_out_unused(*, tools: bool) -> None:
    """Mark the unused optional modules absent (`tools`: tool servers are configured)."""
    names = ALWAYS_UNUSED if tools else ALWAYS_UNUSED + UNUSED_WITHOUT_TOOLS
    for name in names:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def admit(name: str) -> None:
    """Let `name` be imported after all (a stored bot's token is read or written): the
    marker `leave_out_unused` left goes; a loaded module stays as it is."""
    if name in sys.modules and sys.modules[name] is None:
        del sys.modules[name]
