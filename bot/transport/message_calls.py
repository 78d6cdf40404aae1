"""Sending and editing messages when only the message's id is wanted back.

PTB's typed methods (`Bot.send_message`, `edit_message_text`, `edit_message_reply_markup`)
build a `telegram.Message` from every answer, well over a hundred attributes set one at
a time through `TelegramObject.__setattr__`: over a third of the CPU a send costs this
bot, for a message of which a reply keeps only its id. These calls make the same request
through the same path as those methods (`Bot._post`: the bot's defaults, the flood
control of an `ExtBot`, PTB's request object) and read only the id.

Invariants: each call sends exactly the parameters the typed method sends for the same
arguments (`tests/bot/test_message_calls.py` compares them at the fake Bot API), and
fails with the same errors (`BadRequest`, `Forbidden`, `RetryAfter`, `TimedOut`, …);
an answer without a message id where one is due is a `TelegramError`, never a
`KeyError` later.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from telegram import Bot, InlineKeyboardMarkup, MessageEntity, ReplyParameters
from telegram.error import TelegramError


async def send_message(
    bot: Bot,
    chat_id: int,
    text: str,
    *,
    entities: Sequence[MessageEntity] = (),
    thread_id: int | None = None,
    reply_parameters: ReplyParameters | None = None,
    markup: InlineKeyboardMarkup | None = None,
) -> int:
    """`sendMessage`; the id of the message sent."""
    data = {
        "chat_id": chat_id,
        "text": text,
        "entities": list(entities) or None,
        "message_thread_id": thread_id,
        "reply_parameters": reply_parameters,
        "reply_markup": markup,
    }
    return _message_id(await _post(bot, "sendMessage", data))


async def edit_message_text(
    bot: Bot,
    chat_id: int,
    message_id: int,
    text: str,
    *,
    entities: Sequence[MessageEntity] = (),
    markup: InlineKeyboardMarkup | None = None,
) -> None:
    """`editMessageText` of the message `message_id` of the chat."""
    data = {
        "chat_id": chat_id,
        "message_id": message_id,
        "text": text,
        "entities": list(entities) or None,
        "reply_markup": markup,
    }
    await _post(bot, "editMessageText", data)


async def edit_reply_markup(
    bot: Bot, chat_id: int, message_id: int, markup: InlineKeyboardMarkup | None = None
) -> None:
    """`editMessageReplyMarkup`: the message's keyboard becomes `markup` (None: none)."""
    data = {"chat_id": chat_id, "message_id": message_id, "reply_markup": markup}
    await _post(bot, "editMessageReplyMarkup", data)


async def _post(bot: Bot, endpoint: str, data: dict[str, Any]) -> Any:
    # The typed methods' own path below the Message they build: parameters that are
    # None are left out, defaults inserted, an ExtBot's rate limiter passed through.
    return await bot._post(endpoint, data)


def _message_id(result: object) -> int:
    message_id = result.get("message_id") if isinstance(result, dict) else None
    if not isinstance(message_id, int) or isinstance(message_id, bool):
        raise TelegramError(f"the Bot API answered without a message id: {result!r:.200}")
    return message_id
