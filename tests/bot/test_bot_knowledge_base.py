"""The knowledge base as an operator deploys it: documents loaded with `consultation-bot
knowledge add` into the bot's SQLite file are read by the running bot (the real PTB
Application against the fake Bot API, the real openai SDK against the fake model server),
with no knowledge search of the tests plugged in: what the model is sent and the sources
the user sees. A bot whose knowledge base is empty asks the model what it asked before."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.app.test_cli import SCRIPT, run
from tests.bot_harness import bot_settings, running_bot, sent
from tests.history_harness import finish

USER = 7272
WARRANTY = """# Warranty terms

Every appliance carries a warranty from the day of purchase.

## Kettles

Electric kettles are covered for 24 months. Limescale is not a defect.
"""


def system_of(model_server: FakeModelServer, index: int) -> str:
    return str(model_server.requests[index]["messages"][0]["content"])


async def add_documents(tmp_path: Path, db: Path, *paths: Path) -> None:
    done = await asyncio.to_thread(
        run, tmp_path, str(SCRIPT), "knowledge", "add", *map(str, paths), DB_PATH=str(db)
    )
    assert done.returncode == 0, done.stdout + done.stderr


async def test_a_document_added_from_the_command_line_is_read_and_cited(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The kettle passage reaches the round and the final answer's system message under
    its label; the answer's `[K1]` becomes the source listed under it."""
    db = tmp_path / "bot.sqlite3"
    (tmp_path / "warranty.md").write_text(WARRANTY)
    await add_documents(tmp_path, db, tmp_path / "warranty.md")
    settings = bot_settings(db, bot_api, model_server, default_max_rounds=2)
    async with running_bot(settings, bot_api, model_server) as bot:
        await finish(bot, USER, "Is my kettle still covered?", "Bought in May", final="Yes [K1].")
        final = sent(bot, USER)[-1].params["text"]

    for index in (0, 1):
        system = system_of(model_server, index)
        assert "BEGIN KNOWLEDGE BASE EXCERPTS" in system
        assert "[K1] Warranty terms › Kettles" in system  # its title (its top heading), heading
        assert "> Electric kettles are covered for 24 months." in system
    assert final.startswith(
        "Yes [K1].\n\nSources from the knowledge base\n[K1] Warranty terms › Kettles"
    )


async def test_an_empty_knowledge_base_changes_nothing_the_model_is_sent(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """No document loaded: no reference section, and the final answer is not told that
    the knowledge base has nothing on the question."""
    settings = bot_settings(tmp_path / "bot.sqlite3", bot_api, model_server, default_max_rounds=2)
    async with running_bot(settings, bot_api, model_server) as bot:
        await finish(bot, USER, "Is my kettle still covered?", "Bought in May", final="Yes.")
    for index in (0, 1):
        assert "knowledge base" not in system_of(model_server, index).lower()
