"""Messages with nothing visible in them (zero-width and other format characters) are empty:
refused with a clear message, never stored, never sent to the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.domain.asking import UserMessage
from core.domain.blank import is_blank
from core.domain.errors import EmptyMessage
from core.turns.engine import Engine
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from storage.sqlite.store import SqliteStore
from tests.bot_harness import ask_private, started_bot

INVISIBLE = [
    "\u200b",  # zero width space
    "\u200c\u200d",  # zero width non-joiner, joiner
    "\u2060",  # word joiner
    "\ufeff",  # byte order mark
    " \u200b\n\u00ad\t\u2060 ",  # mixed with whitespace and a soft hyphen
    "\u3164",  # Hangul filler
    "\u2800",  # braille pattern blank
    "\ufe0f\u034f",  # variation selector, combining grapheme joiner
]


@pytest.mark.parametrize("text", [*INVISIBLE, "", "  \n\t"])
def test_invisible_text_is_blank(text: str) -> None:
    assert is_blank(text)


@pytest.mark.parametrize("text", ["a", "\u200bhi\u200b", "👍", "\u200d👍", "٣", "?"])
def test_visible_text_is_not_blank(text: str) -> None:
    assert not is_blank(text)


@pytest.mark.parametrize("text", INVISIBLE)
async def test_service_refuses_invisible_text_and_stores_nothing(
    service: Engine, store: SqliteStore, model_server: FakeModelServer, text: str
) -> None:
    """Chats and API sessions alike: EmptyMessage, no consultation, no model call."""
    with pytest.raises(EmptyMessage):
        await service.turns.ask(UserMessage("tg:1", text))
    assert await store.load_active("tg:1") is None
    with pytest.raises(EmptyMessage):
        await service.sessions.open_session(text)
    session = await service.sessions.open_session("A real question")
    with pytest.raises(EmptyMessage):
        await service.sessions.continue_session(session, text)
    stored = await store.get(session)
    assert stored is not None and [m.text for m in stored.messages] == ["A real question"]
    assert model_server.requests == []


async def test_bot_answers_an_invisible_message_as_empty(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A zero-width message gets the "empty" explanation; nothing is stored or asked."""
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        [text] = await ask_private(bot, 961, "\u200b\u200c\u200d\u2060\ufeff")
        assert text == "Your message is empty. Please write your question in words."
        [status] = await ask_private(bot, 961, "/status")
        assert status.startswith("No active consultation.")
        assert model_server.requests == []
