"""TurnRunner against the fake Bot API: how a turn's outcome reaches the chat."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from telegram.ext import ExtBot

from bot.commands.turns import TurnRunner
from bot.transport.progress import Live
from bot.transport.target import Target
from core.domain.errors import TurnSuperseded
from core.domain.outcomes import Reply
from fakes.bot_api import TOKEN, FakeBotApi

CHAT = 1201


@pytest.fixture
async def ext_bot(bot_api: FakeBotApi) -> AsyncIterator[ExtBot[Any]]:
    async with ExtBot(TOKEN, base_url=bot_api.base_url) as bot:
        yield bot


async def test_a_superseded_turn_says_nothing_more(
    ext_bot: ExtBot[Any], bot_api: FakeBotApi, caplog: pytest.LogCaptureFixture
) -> None:
    """When another worker already answered this round, the turn ends quietly: no reply,
    no error text, an INFO line in the log, and no reply counted."""
    seen: list[Reply] = []
    runner = TurnRunner(ttl_minutes=60, on_reply=seen.append)

    async def superseded(live: Live) -> Reply:
        raise TurnSuperseded("another worker answered round 1")

    with caplog.at_level(logging.INFO, logger="bot.commands.turns"):
        outcome = await runner.run(ext_bot, Target(CHAT), "en", superseded)
    assert outcome is None and seen == []
    assert bot_api.calls_of("sendMessage") == []
    [record] = [r for r in caplog.records if r.name == "bot.commands.turns"]
    assert record.levelno == logging.INFO and str(CHAT) in record.getMessage()
