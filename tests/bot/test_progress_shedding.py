"""Progress is shed first under overload: a draft whose turn comes more than `shed_after`
late (the event loop was that far behind every chat) is not sent, and the next interval
tries again; on time, the draft goes out. A real PTB ExtBot, with the bot's request and
flood control, talks to the fake Bot API."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from telegram.ext import ExtBot

from bot.transport.flood import ChatFloodControl
from bot.transport.progress import TYPING_DEFERRAL, Progress
from bot.transport.progress_budget import ProgressBudget
from bot.transport.target import Target
from bot.transport.telegram_http import AiohttpRequest
from fakes.bot_api import TOKEN, FakeBotApi

USER = 4242


@pytest.fixture
async def telegram(bot_api: FakeBotApi) -> AsyncIterator[ExtBot]:
    async with ExtBot(
        TOKEN, base_url=bot_api.base_url, request=AiohttpRequest(), rate_limiter=ChatFloodControl()
    ) as bot:
        yield bot


def drafts(api: FakeBotApi) -> list[str]:
    return [c.params["text"] for c in api.calls_of("sendMessageDraft") if c.status == 200]


async def test_a_draft_on_time_is_sent(telegram: ExtBot, bot_api: FakeBotApi) -> None:
    progress = Progress(
        telegram, Target(USER), first_delay=0.01, typing_delay=3600, shed_after=1.0
    )  # a loaded machine may run a timer 25 ms late: "on time" here is within a second
    await progress.update("The first words")
    await bot_api.wait_for(lambda c: c.method == "sendMessageDraft")
    await progress.close()
    assert drafts(bot_api) == ["The first words"] and progress.shed == 0


async def test_a_draft_whose_turn_comes_late_is_skipped_then_tried_again(
    telegram: ExtBot, bot_api: FakeBotApi
) -> None:
    """The loop is held 0.4 s past the draft's time: that draft is not sent; an interval
    later, with the loop free again, the text so far is."""
    progress = Progress(
        telegram, Target(USER), first_delay=0.01, interval=0.2, typing_delay=3600, shed_after=0.1
    )
    await progress.update("The first words")
    time.sleep(0.4)  # noqa: ASYNC251 - the overload: nothing else runs meanwhile
    await asyncio.sleep(0.05)  # the late timer fires and its turn is skipped
    assert progress.shed == 1 and drafts(bot_api) == []
    await progress.update("The first words and more")
    await bot_api.wait_for(lambda c: c.method == "sendMessageDraft")
    await progress.close()
    assert drafts(bot_api) == ["The first words and more"]


async def test_a_late_typing_action_waits_once_then_goes(
    telegram: ExtBot, bot_api: FakeBotApi
) -> None:
    """Its turn came 0.3 s late: it is put off by `TYPING_DEFERRAL`, then sent."""
    progress = Progress(telegram, Target(USER), first_delay=3600, typing_delay=0.01)
    progress.start()
    time.sleep(0.3)  # noqa: ASYNC251 - the loop is behind
    await asyncio.sleep(0.2)
    assert bot_api.calls_of("sendChatAction") == [] and progress.shed == 1
    await bot_api.wait_for(lambda c: c.method == "sendChatAction")
    await progress.close()
    assert [c.params["action"] for c in bot_api.calls_of("sendChatAction")] == ["typing"]


async def test_a_reply_within_the_deferral_needs_no_typing_action(
    telegram: ExtBot, bot_api: FakeBotApi
) -> None:
    progress = Progress(telegram, Target(USER), first_delay=3600, typing_delay=0.01)
    progress.start()
    time.sleep(0.3)  # noqa: ASYNC251 - the loop is behind
    await asyncio.sleep(0.1)
    await progress.close()  # the reply came
    await asyncio.sleep(TYPING_DEFERRAL + 0.2)
    assert bot_api.calls_of("sendChatAction") == []


async def test_typing_actions_past_the_bots_budget_wait_for_it(
    telegram: ExtBot, bot_api: FakeBotApi
) -> None:
    """Two chats' turns start together with a budget of one request: the first chat's
    typing action goes at once, the second's is put off and goes once the budget refills."""
    clock = [0.0]
    budget = ProgressBudget(rate=1.0, burst=1.0, clock=lambda: clock[0])
    first = Progress(telegram, Target(USER), first_delay=3600, typing_delay=0.0, budget=budget)
    second = Progress(telegram, Target(USER + 1), first_delay=3600, typing_delay=0.0, budget=budget)
    first.start()
    second.start()
    await bot_api.wait_for(lambda c: c.method == "sendChatAction")
    await asyncio.sleep(0.1)
    assert [c.params["chat_id"] for c in bot_api.calls_of("sendChatAction")] == [USER]
    assert (first.shed, second.shed) == (0, 1)
    clock[0] = 1.0  # a second later: one more request in the budget
    await bot_api.wait_for(lambda c: c.params.get("chat_id") == USER + 1, timeout=5)
    await first.close()
    await second.close()


async def test_a_draft_past_the_bots_budget_is_skipped_then_tried_again(
    telegram: ExtBot, bot_api: FakeBotApi
) -> None:
    """The budget is spent: the draft is not sent, and an interval later (the budget
    refilled meanwhile) the text so far is."""
    clock = [0.0]
    budget = ProgressBudget(rate=1.0, burst=1.0, clock=lambda: clock[0])
    assert budget.take()  # another chat spent it
    progress = Progress(
        telegram,
        Target(USER),
        first_delay=0.01,
        interval=0.2,
        typing_delay=3600,
        shed_after=1.0,
        budget=budget,
    )
    await progress.update("The first words")
    await asyncio.sleep(0.1)
    assert drafts(bot_api) == [] and progress.shed == 1
    clock[0] = 1.0
    await bot_api.wait_for(lambda c: c.method == "sendMessageDraft")
    await progress.close()
    assert drafts(bot_api) == ["The first words"]


def test_the_budget_refills_at_its_rate_up_to_its_burst() -> None:
    clock = [0.0]
    budget = ProgressBudget(rate=2.0, burst=3.0, clock=lambda: clock[0])
    assert [budget.take() for _ in range(4)] == [True, True, True, False]
    clock[0] = 0.5  # one request back
    assert [budget.take() for _ in range(2)] == [True, False]
    clock[0] = 100.0  # a long quiet spell fills it to its burst, no more
    assert [budget.take() for _ in range(4)] == [True, True, True, False]
