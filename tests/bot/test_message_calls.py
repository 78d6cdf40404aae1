"""Sends and edits that read back only the message id (`bot.transport.message_calls`): the
very request PTB's typed methods make, their errors, the bot's flood control, and an answer
without an id refused clearly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, MessageEntity, ReplyParameters
from telegram.error import BadRequest, Forbidden, TelegramError
from telegram.ext import ExtBot

from bot.transport import message_calls
from bot.transport.flood import ChatFloodControl
from bot.transport.telegram_http import AiohttpRequest
from fakes.bot_api import TOKEN, FakeBotApi

CHAT = -1001702
KEYBOARD = InlineKeyboardMarkup([[InlineKeyboardButton("Final answer now", callback_data="qf")]])
BOLD = [MessageEntity(MessageEntity.BOLD, 0, 5)]


@pytest.fixture
async def telegram(bot_api: FakeBotApi) -> AsyncIterator[ExtBot[Any]]:
    """An ExtBot wired as the application wires it: aiohttp requests, the chat flood control."""
    bot: ExtBot[Any] = ExtBot(
        TOKEN, base_url=bot_api.base_url, request=AiohttpRequest(), rate_limiter=ChatFloodControl()
    )
    async with bot:
        yield bot


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"entities": BOLD, "markup": KEYBOARD},
        {"thread_id": 5, "reply_to": 77},
        {"entities": BOLD, "thread_id": 5, "reply_to": 77, "markup": KEYBOARD},
    ],
)
async def test_a_send_is_the_request_send_message_makes(
    telegram: ExtBot[Any], bot_api: FakeBotApi, options: dict[str, Any]
) -> None:
    """The same parameters reach Telegram as through `send_message`, and the id returned
    is the one Telegram gave the message."""
    entities = options.get("entities", ())
    reply = options.get("reply_to")
    parameters = ReplyParameters(reply, allow_sending_without_reply=True) if reply else None
    typed = await telegram.send_message(
        CHAT,
        "Which dates?",
        entities=list(entities) or None,
        message_thread_id=options.get("thread_id"),
        reply_parameters=parameters,
        reply_markup=options.get("markup"),
        link_preview_options=None,
    )
    message_id = await message_calls.send_message(
        telegram,
        CHAT,
        "Which dates?",
        entities=entities,
        thread_id=options.get("thread_id"),
        reply_parameters=parameters,
        markup=options.get("markup"),
    )
    first, second = bot_api.calls_of("sendMessage")
    assert first.params == second.params
    assert typed.message_id == first.result["message_id"]
    assert message_id == second.result["message_id"] != typed.message_id


async def test_edits_are_the_requests_the_typed_edits_make(
    telegram: ExtBot[Any], bot_api: FakeBotApi
) -> None:
    """A text edit and a keyboard taken away send what `edit_message_text` and
    `edit_message_reply_markup` send."""
    message_id = await message_calls.send_message(telegram, CHAT, "Which", markup=KEYBOARD)
    await telegram.edit_message_text(
        "Which dates?", chat_id=CHAT, message_id=message_id, entities=BOLD, reply_markup=KEYBOARD
    )
    await message_calls.edit_message_text(
        telegram, CHAT, message_id, "Which dates, then?", entities=BOLD, markup=KEYBOARD
    )
    typed_text, own_text = bot_api.calls_of("editMessageText")
    assert own_text.params == {**typed_text.params, "text": "Which dates, then?"}
    assert own_text.status == 200

    await message_calls.edit_reply_markup(telegram, CHAT, message_id)
    await message_calls.send_message(telegram, CHAT, "Again", markup=KEYBOARD)
    again = bot_api.calls_of("sendMessage")[-1].result["message_id"]
    await telegram.edit_message_reply_markup(CHAT, again, reply_markup=None)
    own_markup, typed_markup = bot_api.calls_of("editMessageReplyMarkup")
    assert own_markup.params == {**typed_markup.params, "message_id": message_id}
    assert own_markup.status == typed_markup.status == 200
    assert bot_api.messages[(CHAT, message_id)]["reply_markup"] is None


async def test_failures_are_the_typed_methods_errors(
    telegram: ExtBot[Any], bot_api: FakeBotApi
) -> None:
    """Telegram's refusals arrive as PTB's errors: a bad request, a chat that blocked the bot."""
    bot_api.fail_next("sendMessage", status=400, description="Bad Request: can't parse entities")
    with pytest.raises(BadRequest, match="parse entities"):
        await message_calls.send_message(telegram, CHAT, "Hi")
    bot_api.fail_next("editMessageReplyMarkup", status=403, description="Forbidden: bot was kicked")
    with pytest.raises(Forbidden, match="kicked"):
        await message_calls.edit_reply_markup(telegram, CHAT, 1)


async def test_a_send_waits_out_flood_control_like_the_typed_one(
    telegram: ExtBot[Any], bot_api: FakeBotApi
) -> None:
    """A 429 goes through the bot's flood control, which pauses the chat and sends again."""
    bot_api.fail_next("sendMessage", status=429, description="Too Many Requests", retry_after=1)
    message_id = await message_calls.send_message(telegram, CHAT, "Hi")
    limited, delivered = bot_api.calls_of("sendMessage")
    assert limited.status == 429 and delivered.status == 200
    assert delivered.monotonic - limited.monotonic >= 1.0
    assert message_id == delivered.result["message_id"]


async def test_an_answer_without_a_message_id_is_a_telegram_error() -> None:
    """A server answering a send with no message in it fails the send as a TelegramError."""

    async def answer(request: web.Request) -> web.Response:
        if request.match_info["method"] == "getMe":
            me = {"id": 1, "is_bot": True, "first_name": "Bot", "username": "the_bot"}
            return web.json_response({"ok": True, "result": me})
        return web.json_response({"ok": True, "result": True})

    app = web.Application()
    app.router.add_post("/bot{token}/{method}", answer)
    async with (
        TestServer(app, host="127.0.0.1") as server,
        Bot(TOKEN, base_url=str(server.make_url("/bot"))) as bot,
    ):
        with pytest.raises(TelegramError, match="without a message id"):
            await message_calls.send_message(bot, CHAT, "Hi")
