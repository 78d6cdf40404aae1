"""One process without the shared inbox (SQLite, PTB's own update queue): an update whose
handling runs past INBOX_HANDLING_DEADLINE_SECONDS is stopped, its chat told once, and the
chat's next message answered, through the real PTB Application, the fake Bot API and a fake
model that never finishes the first turn."""

from __future__ import annotations

from pathlib import Path

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from i18n.translate import t
from tests import bot_harness as harness

USER = 973


async def test_a_turn_past_the_deadline_is_stopped_and_the_chat_goes_on(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The stuck turn ends at the deadline with the "could not handle" text in the user's
    language; the message sent meanwhile, waiting behind it, is answered next, and the
    given-up message is taken back: the model never sees it again."""
    settings = {"inbox_handling_deadline_seconds": 1}
    async with harness.started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, **settings
    ) as bot:
        bot.model.enqueue(keepalive_only=0.05)  # the first turn's model never answers
        await bot.send(USER, "Первый вопрос", language_code="ru")
        await bot.send(USER, "Второй вопрос", language_code="ru")
        texts = await harness.wait_sent(bot, USER, 2)
    assert texts[0] == t("ru", "update_given_up")
    assert texts[1].startswith("Reply to: ")
    assert harness.conversation(bot.model.requests[-1]) == ["Второй вопрос"]
    assert texts.count(t("ru", "update_given_up")) == 1
