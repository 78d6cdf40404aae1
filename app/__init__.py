"""The composition root: settings, wiring (`app.runtime`) and the entry points (`app.cli`).

The only package that knows every other one: it builds the store, the model clients,
the engine and the edges, and hands each edge the engine collaborators it uses and its own
small config.
"""

import sys

# httpx (python-telegram-bot's HTTP client) imports its command line when it is imported,
# if click, rich and pygments are all installed: uvicorn, which the MCP SDK (`mcp`) needs,
# brings click, and the evaluator rich and pygments. Loaded, they cost every process about
# 5 MB and 70 ms it never uses, tool servers or not. A `None` entry makes that one import
# fail, and httpx takes its own fallback (a `main` saying its CLI is not installed); no
# process of this product runs httpx's command line. Set here, before any edge imports
# httpx: every entry point (`consultation-bot`, `python -m bot`, `python -m api`) starts
# in this package.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
