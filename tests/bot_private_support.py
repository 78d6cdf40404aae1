"""Helpers for private-chat end-to-end tests: start a bot, talk to it, read what it sent.

Invariant: every helper waits on the fake Bot API's recorded calls (never on sleeps), and
"sent" always means a sendMessage the fake accepted (status 200), in the order received.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.bot_harness import RunningBot, bot_settings, running_bot
from tests.fakes.bot_api import Call, FakeBotApi
from tests.fakes.model_server import FakeModelServer


@contextlib.asynccontextmanager
async def private_bot(
    db_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer, **overrides: Any
) -> AsyncIterator[RunningBot]:
    """A running bot on `db_path` with settings `overrides`."""
    settings = bot_settings(db_path, bot_api, model_server, **overrides)
    async with running_bot(settings, bot_api, model_server) as running:
        yield running


def delivered(call: Call, chat_id: int) -> bool:
    """A sendMessage to the chat that the fake has answered with a message.

    `result` is set only once a call is answered; `status` reads 200 while it is in flight.
    """
    return (
        call.method == "sendMessage"
        and call.result is not None
        and str(call.params.get("chat_id")) == str(chat_id)
    )


def sent(bot: RunningBot, chat_id: int) -> list[Call]:
    """Delivered sendMessage calls to the chat, in order."""
    return [c for c in bot.api.calls if delivered(c, chat_id)]


async def wait_sent(bot: RunningBot, chat_id: int, count: int, timeout: float = 10.0) -> list[str]:  # noqa: ASYNC109
    """Wait until `count` messages in total were delivered to the chat; return all texts."""
    await bot.api.wait_for(lambda c: delivered(c, chat_id), timeout, count=count)
    return [c.params["text"] for c in sent(bot, chat_id)]


async def say(
    bot: RunningBot, chat_id: int, text: str | None, *, parts: int = 1, **kwargs: Any
) -> list[str]:
    """Send a message and wait for `parts` more messages to the chat; return their texts."""
    before = len(sent(bot, chat_id))
    await bot.send(chat_id, text, **kwargs)
    texts = await wait_sent(bot, chat_id, before + parts)
    return texts[before:]


async def press(bot: RunningBot, chat_id: int, data: str, message_id: int) -> str:
    """Press an inline button under `message_id`; return the bot's next message."""
    before = len(sent(bot, chat_id))
    bot.api.push_update(bot.api.callback_query(chat_id, chat_id, data, message_id))
    texts = await wait_sent(bot, chat_id, before + 1)
    return texts[before]


def buttons(call: Call) -> list[str]:
    """callback_data of every inline button of a sent message."""
    markup = call.params.get("reply_markup") or {}
    return [b["callback_data"] for row in markup.get("inline_keyboard", []) for b in row]


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def conversation(request: dict[str, Any]) -> list[str]:
    """Contents of the non-system messages the model was sent."""
    return [m["content"] for m in request["messages"] if m["role"] != "system"]
