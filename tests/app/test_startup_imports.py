"""The bot process holds only what its deployment and its messages need.

A real `consultation-bot run` on SQLite answers a text message and a PDF, stops on
SIGTERM, and then lists the modules it had loaded. The document parsers (pypdf, lxml)
load in the reader processes only, PostgreSQL's modules, asyncpg and the shared inbox's
worker and polling leader only with DATABASE_URL, the transcription client with
TRANSCRIPTION_MODEL, numpy and hybrid retrieval's parts with EMBEDDING_MODEL, the MCP SDK
and the tool servers' toolbox with MCP_SERVERS (nor the `click` and `cryptography` that
the SDK installs and httpx and python-telegram-bot would import: `app.lean_imports`), the DOCX
builder with the first export, jsonschema with the first output schema, json_repair with
the first broken JSON reply, and the evaluator with its
libraries (rich, PyYAML), the knowledge base's splitter (semantic-text-splitter, loaded by
`consultation-bot knowledge add`), the tests' document builders (python-docx, fpdf2) and
Babel (the `.po` reader of `make messages`) never, nor the HTTP server without the API or
the webhook: each would cost the process memory for as long as it runs. Of the interface
catalogs it keeps only those of the languages its people use: none, when everyone writes
in English, though it set the command menus of every offered language.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.app.test_entrypoint import USER, answered, fakes_env
from tests.media.test_media_documents import pdf_with_text

NOT_LOADED = (
    "pypdf",
    "lxml",
    "docx",
    "media.parsers",
    "asyncpg",
    "storage.postgres",
    "bot.updates.inbox",
    "bot.updates.polling",
    "media.transcription",
    "media.export_docx",
    "jsonschema",
    "fpdf",
    "evaluation",
    "rich",
    "yaml",
    "api.app",
    "admin.app",
    "aiohttp.web",
    "babel",
    "json_repair",
    "semantic_text_splitter",
    "core.domain.chunking",
    "numpy",
    "media.embeddings",
    "storage.hybrid",
    "storage.vector_index",
    "mcp",
    "mcp_types",
    "tools.servers",
    "tools.toolbox",
    "click",
    "cryptography",
)
"""Packages and modules the SQLite bot must not import, whatever it answered."""

# `python -c` runs the bot's entry point and, once it has stopped, writes the modules loaded
# (a `None` entry marks one absent) and how many gettext catalogs are still alive.
RUN_AND_LIST = """
import atexit, gc, gettext, json, sys
def listing():
    gc.unfreeze()  # what start-up made was frozen out of get_objects
    catalogs = sum(isinstance(o, gettext.GNUTranslations) for o in gc.get_objects())
    loaded = sorted(name for name, module in sys.modules.items() if module is not None)
    state = {"modules": loaded, "catalogs": catalogs}
    open(sys.argv[1], "w").write(json.dumps(state))
atexit.register(listing)
from app.cli import main
sys.exit(main(["run"]))
"""


def loaded(modules: set[str], name: str) -> bool:
    return any(module == name or module.startswith(name + ".") for module in modules)


async def test_the_sqlite_bot_never_loads_parsers_drivers_or_the_evaluator(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    listing = tmp_path / "modules.txt"
    env = fakes_env(tmp_path, bot_api, model_server, DB_PATH=str(tmp_path / "bot.sqlite3"))
    log = tmp_path / "bot.log"
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            RUN_AND_LIST,
            str(listing),
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
        )
    try:
        bot_api.push_update(bot_api.text_message(USER, "Help me pick weights", user_id=USER))
        await answered(bot_api, "Round 1 of 3")
        pdf = bot_api.document(pdf_with_text("Invoice 42"), "invoice.pdf", None)
        bot_api.push_update(
            bot_api.text_message(USER, None, user_id=USER, media=pdf, caption="Is this right?")
        )
        await answered(bot_api, "Round 2 of 3")
        assert "Invoice 42" in str(model_server.requests[-1]["messages"])  # a reader read it
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0, log.read_text()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    state = json.loads(listing.read_text())
    modules = set(state["modules"])
    # The listing is the running bot's: its engine, edge and store were loaded.
    assert {
        "telegram",
        "openai",
        "bot.app",
        "core.turns.service",
        "storage.sqlite.store",
    } <= modules
    assert [name for name in NOT_LOADED if loaded(modules, name)] == []
    assert state["catalogs"] == 0  # the menus' and the follow-up prompt's were not kept
