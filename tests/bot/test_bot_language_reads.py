"""The chosen interface language is read from the store once per person while fresh, not
on every update, and every change made in this process applies to the very next update:
a choice, clearing it, /forget and the console's deletion of a person's memory.

The bot runs as in production (real Application, fake Bot API) on a real SQLite store
that counts its reads of chosen languages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.app import build_application
from core.llm.llm import OpenAICompleter
from core.turns.engine import Engine
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from i18n.translate import t
from storage.sqlite.store import SqliteStore
from tests.bot_harness import bot_settings, delivered
from tests.service_harness import make_service

USER = 733
PERSON = f"tg:{USER}"


class CountingStore(SqliteStore):
    """The real SQLite store, counting the chosen languages it is asked for."""

    language_reads = 0

    async def load_language(self, person: str) -> str | None:
        self.language_reads += 1
        return await super().load_language(person)


@dataclass
class Bot:
    api: FakeBotApi
    store: CountingStore
    engine: Engine

    def texts(self) -> list[str]:
        return [c.params["text"] for c in self.api.calls if delivered(c, USER)]

    async def say(self, text: str) -> str:
        """Send `text` in the private chat (client set to English); the bot's answer."""
        before = len(self.texts())
        self.api.push_update(self.api.text_message(USER, text, user_id=USER))
        await self.api.wait_for(lambda c: delivered(c, USER), count=before + 1)
        return self.texts()[before]

    async def press(self, data: str) -> str:
        """Press a button under the bot's last message; the bot's next message."""
        before = len(self.texts())
        message_id = [c for c in self.api.calls if delivered(c, USER)][-1].result["message_id"]
        self.api.push_update(self.api.callback_query(USER, USER, data, message_id))
        await self.api.wait_for(lambda c: delivered(c, USER), count=before + 1)
        return self.texts()[before]


@pytest.fixture
async def bot(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer, completer: OpenAICompleter
) -> AsyncIterator[Bot]:
    path = tmp_path / "bot.sqlite3"
    store = await CountingStore.open(path)
    try:
        engine = make_service(store, completer)
        settings = bot_settings(path, bot_api, model_server)
        application = build_application(settings.bot_config(), engine)
        async with application:
            await application.start()
            assert application.updater is not None
            await application.updater.start_polling(poll_interval=0, timeout=1)
            try:
                yield Bot(bot_api, store, engine)
            finally:
                await application.updater.stop()
                await application.stop()
    finally:
        await store.close()


def start(language: str) -> str:
    return t(language, "start", rounds=3)


async def test_messages_of_a_person_read_their_language_once(bot: Bot) -> None:
    """Five updates of one person cost one read of their language, not five."""
    for _ in range(5):
        assert await bot.say("/start") == start("en")
    assert bot.store.language_reads == 1


async def test_a_choice_applies_to_the_very_next_message_then_is_not_read_again(
    bot: Bot,
) -> None:
    assert await bot.say("/start") == start("en")
    await bot.say("/language")
    assert await bot.press("lang:de") == t("de", "language_set", language="Deutsch")
    reads = bot.store.language_reads
    for _ in range(3):
        assert await bot.say("/start") == start("de")
    assert bot.store.language_reads == reads + 1  # read once after the change


async def test_clearing_the_choice_applies_to_the_very_next_message(bot: Bot) -> None:
    await bot.say("/language")
    await bot.press("lang:de")
    assert await bot.say("/start") == start("de")
    await bot.say("/language")
    cleared = await bot.press("lang:auto")
    assert cleared == t("en", "language_cleared", language="English")
    assert await bot.say("/start") == start("en")
    assert await bot.engine.languages.of(PERSON) is None


async def test_forget_applies_to_the_very_next_message(bot: Bot) -> None:
    await bot.say("/language")
    await bot.press("lang:ru")
    assert await bot.say("/start") == start("ru")
    await bot.say("/forget")
    [delete, _] = [
        b["callback_data"]
        for row in bot.api.calls_of("sendMessage")[-1].params["reply_markup"]["inline_keyboard"]
        for b in row
    ]
    message_id = bot.api.calls_of("sendMessage")[-1].result["message_id"]
    bot.api.push_update(bot.api.callback_query(USER, USER, delete, message_id))
    await bot.api.wait_for("editMessageText")  # the confirmation now says it is done
    assert await bot.say("/start") == start("en")


async def test_a_choice_made_on_another_worker_shows_once_the_cache_expires(
    bot: Bot, tmp_path: Path
) -> None:
    """Another process's change reaches this one only through the store: what this one
    read stays until its entry expires (at most `LANGUAGE_CACHE_SECONDS`), then the next
    message reads the change."""
    assert await bot.say("/start") == start("en")
    other = await SqliteStore.open(tmp_path / "bot.sqlite3")
    try:
        await other.save_language(PERSON, "uk")
    finally:
        await other.close()
    assert await bot.say("/start") == start("en")  # still what this worker read
    bot.engine.languages.refresh(PERSON)  # what expiry does, without waiting for it
    assert await bot.say("/start") == start("uk")
