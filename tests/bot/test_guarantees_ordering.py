"""The per-chat update processor on its own: which updates skip the conversation's turn.

Ordering itself is tested end to end (tests/bot/test_guarantees_bot.py); these pin the two
decisions made before the lock is taken, where the end-to-end tests cannot reach.
"""

from __future__ import annotations

import datetime as dt

import pytest
from telegram import Chat, Message, MessageEntity, Update

from bot.updates.ordering import PerChatUpdateProcessor, command_of

CHAT = Chat(801, Chat.PRIVATE)
WHEN = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def text_update(text: str, *entities: MessageEntity) -> Update:
    return Update(1, message=Message(1, WHEN, CHAT, text=text, entities=entities))


def leading_command(length: int) -> MessageEntity:
    return MessageEntity(MessageEntity.BOT_COMMAND, 0, length)


@pytest.mark.parametrize(
    ("update", "name"),
    [
        (text_update("/reset", leading_command(6)), "reset"),
        (text_update("/Status@consult_bot now", leading_command(19)), "status"),
        (text_update("/status"), None),  # no entity: Telegram did not see a command
        (
            text_update("@consult_bot status", MessageEntity(MessageEntity.MENTION, 0, 12)),
            None,
        ),
        (
            text_update("please /reset", MessageEntity(MessageEntity.BOT_COMMAND, 7, 6)),
            None,
        ),
    ],
)
def test_only_a_leading_bot_command_names_a_command(update: Update, name: str | None) -> None:
    """A command is the bot_command entity at the very start, without the bot's name;
    a leading mention or a command later in the text is no command."""
    assert command_of(update) == name


async def test_an_update_that_is_no_telegram_update_is_processed() -> None:
    """Custom objects put on the update queue run at once (they belong to no chat)."""
    processor = PerChatUpdateProcessor()
    ran: list[str] = []

    async def handle() -> None:
        ran.append("custom")

    await processor.do_process_update("a custom update", handle())
    assert ran == ["custom"]
