"""A bot whose database cannot write (disk full) tells the user to try again later, and
answers normally once space is back: no internal error, no message lost or doubled."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.app.test_entrypoint import clean_env
from tests.bot_harness import ask_private, conversation, started_bot
from tests.storage.test_store_faults import fill_disk, free_disk

USER = 901
OTHER = 902
RUSSIAN = 903


async def test_a_full_disk_is_explained_and_the_message_can_be_sent_again(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """SQLITE_FULL: "temporarily unavailable" in the user's language; later it works."""
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        await ask_private(bot, OTHER, "A first question that takes some room " * 20)
        await fill_disk(bot.runtime.store)
        # Needs pages the disk lacks; numbered, as the fake model echoes it (a reply
        # repeating one line is a loop, cut short).
        question = " ".join(f"Which laptop {n:03d} should I buy?" for n in range(125))
        [english] = await ask_private(bot, USER, question)
        # One notice a minute per chat (bot.transport.outage): the Russian speaker writes from
        # their own.
        [russian] = await ask_private(bot, RUSSIAN, question, language_code="ru")
        assert "temporarily unavailable" in english and "try again" in english
        assert "временно недоступно" in russian
        assert model_server.requests[1:] == []  # nothing was stored, so nothing was asked

        await free_disk(bot.runtime.store)
        [reply] = await ask_private(bot, USER, question)
        assert reply.endswith("Round 1 of 3")
        assert conversation(model_server.requests[-1]) == [question]


async def test_a_command_that_cannot_be_saved_is_explained_too(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A settings command while the database file is gone: "temporarily unavailable",
    not "something went wrong"."""
    db_path = tmp_path / "bot.sqlite3"
    async with started_bot(db_path, bot_api, model_server) as bot:
        db_path.unlink()
        [reply] = await ask_private(bot, USER, "/rounds 4")
        assert "temporarily unavailable" in reply


async def test_the_console_explains_a_store_outage_and_keeps_running(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """`python -m bot console` with its database file deleted under it: one clear line,
    no traceback, and the console goes on to /quit normally."""
    db_path = tmp_path / "console.sqlite3"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "console",
        env=clean_env(
            tmp_path, OPENAI_API_KEY="test-key", OPENAI_BASE_URL=model_server.base_url,
            DB_PATH=str(db_path), LOG_LEVEL="ERROR",
        ),
        cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    line = b"?"
    while b"/help" not in line:  # the help text is printed once the store is open
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        assert line, "the console ended before printing its help"
    db_path.unlink()
    out, err = await asyncio.wait_for(process.communicate(b"Hello there\n/quit\n"), 30)
    assert process.returncode == 0, err.decode()
    assert "temporarily unavailable" in out.decode()
    assert "Traceback" not in err.decode()
    assert model_server.requests == []
