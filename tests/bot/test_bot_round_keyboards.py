"""An older round's keyboard is taken away when the next reply is delivered (real
Application, fake Bot API, fake model server, real SQLite file): by the next round and by
the final answer, after a restart too (the message is known from the store), and a
Telegram error taking it away never fails the new round; a press on a keyboard left
behind is told its questions were answered."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from fakes.bot_api import Call, FakeBotApi
from fakes.model_server import FakeModelServer, round_json
from tests.bot_harness import RunningBot, sent, started_bot, wait_sent

USER = 5301
ONE = round_json("Got it.", [("Budget?", ["Low", "High"])])
OTHER = round_json("And one more.", [("City?", ["Berlin", "Rome"])])
STALE = "These questions were already answered."


async def ask(bot: RunningBot, text: str) -> Call:
    """Send a private message; the bot's reply (the message that carries the footer)."""
    before = len(sent(bot, USER))
    await bot.send(USER, text)
    await wait_sent(bot, USER, before + 1)
    return sent(bot, USER)[-1]


def message_id(call: Call) -> int:
    assert call.result is not None
    return int(call.result["message_id"])


def taken_away(bot: RunningBot) -> list[int]:
    """The messages whose keyboard the bot removed (an edit with no markup), in order."""
    return [
        int(c.params["message_id"])
        for c in bot.api.calls_of("editMessageReplyMarkup")
        if "reply_markup" not in c.params
    ]


def markup_of(api: FakeBotApi, call: Call) -> Any:
    """The keyboard the chat shows under the message `call` sent now."""
    return api.messages[(USER, message_id(call))].get("reply_markup")


def settings(**overrides: Any) -> dict[str, Any]:
    return {"llm_structured_questions": "auto", "max_rounds": 3, **overrides}


async def test_the_next_round_and_the_final_answer_take_the_older_keyboards_away(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Round 1's keyboard goes when round 2 is delivered, round 2's when the final answer
    is; the final answer keeps its own buttons, and an option of round 1 pressed anyway
    is told it was answered."""
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server, **settings()) as bot:
        model_server.enqueue(ONE)
        first = await ask(bot, "Which laptop?")
        assert markup_of(bot_api, first) is not None
        model_server.enqueue(OTHER)
        second = await ask(bot, "A cheap one")
        await bot_api.wait_for(lambda c: c.method == "editMessageReplyMarkup", 10)
        assert taken_away(bot) == [message_id(first)]
        assert markup_of(bot_api, first) is None
        assert markup_of(bot_api, second) is not None

        model_server.enqueue("Buy the light one.")
        final = await ask(bot, "/answer")
        await bot_api.wait_for(lambda c: c.method == "editMessageReplyMarkup", 10, count=2)
        assert taken_away(bot) == [message_id(first), message_id(second)]
        assert markup_of(bot_api, second) is None
        kinds = [
            b["callback_data"][:2]
            for row in markup_of(bot_api, final)["inline_keyboard"]
            for b in row
        ]
        assert kinds == ["fu", "ex"]

        option = first.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        update = bot_api.push_update(bot_api.callback_query(USER, USER, option, message_id(first)))
        query = update["callback_query"]["id"]
        answer = await bot_api.wait_for(
            lambda c: c.method == "answerCallbackQuery" and c.params["callback_query_id"] == query,
            10,
        )
        assert answer.params.get("text") == STALE


async def test_a_restarted_bot_takes_away_the_keyboard_sent_before_it_stopped(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The message carrying round 1's keyboard is read from the store: the bot that
    delivers round 2 after a restart takes it away."""
    db = tmp_path / "bot.sqlite3"
    async with started_bot(db, bot_api, model_server, **settings()) as bot:
        model_server.enqueue(ONE)
        first = await ask(bot, "Which laptop?")
    async with started_bot(db, bot_api, model_server, **settings()) as bot:
        model_server.enqueue(OTHER)
        second = await ask(bot, "A cheap one")
        await bot_api.wait_for(lambda c: c.method == "editMessageReplyMarkup", 10)
        assert taken_away(bot) == [message_id(first)]
        assert markup_of(bot_api, first) is None
        assert markup_of(bot_api, second) is not None


async def test_a_telegram_error_taking_a_keyboard_away_never_fails_the_new_round(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Round 1's message cannot be edited (deleted, too old): round 2 is delivered all the
    same, and round 3 takes round 2's keyboard away as usual."""
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, **settings(max_rounds=4)
    ) as bot:
        model_server.enqueue(ONE)
        first = await ask(bot, "Which laptop?")
        bot_api.fail_next(
            "editMessageReplyMarkup", status=400, description="Bad Request: message can't be edited"
        )
        model_server.enqueue(OTHER)
        second = await ask(bot, "A cheap one")
        assert "And one more." in second.params["text"]
        assert markup_of(bot_api, second) is not None
        failed = await bot_api.wait_for(lambda c: c.method == "editMessageReplyMarkup", 10)
        assert failed.status == 400 and markup_of(bot_api, first) is not None

        model_server.enqueue(ONE)
        third = await ask(bot, "Rome")
        await bot_api.wait_for(lambda c: c.method == "editMessageReplyMarkup", 10, count=2)
        assert taken_away(bot)[-1] == message_id(second)
        assert markup_of(bot_api, second) is None
        assert markup_of(bot_api, third) is not None


async def press_popup(bot: RunningBot, data: str, message: Call) -> str:
    """Press a button under `message`; the popup the press was answered with."""
    update = bot.api.push_update(bot.api.callback_query(USER, USER, data, message_id(message)))
    query = update["callback_query"]["id"]
    answer = await bot.api.wait_for(
        lambda c: c.method == "answerCallbackQuery" and c.params["callback_query_id"] == query,
        10,
    )
    return str(answer.params.get("text") or "")


def final_now(call: Call) -> str:
    """The data of the "Give the final answer now" button under a round's message."""
    rows = call.params["reply_markup"]["inline_keyboard"]
    return str(rows[-1][-1]["callback_data"])


async def test_final_answer_now_under_an_older_round_is_told_it_was_answered(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The "Give the final answer now" button pressed under round 1 (left behind: its
    removal failed) while round 2 is the current one, or after /reset under the old
    consultation's round: the popup says the questions were answered; no model call,
    nothing stored, no message. Under the current round it gives the final answer, and the
    new consultation's first round took the old one's keyboard away."""
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server, **settings()) as bot:
        model_server.enqueue(ONE)
        first = await ask(bot, "Which laptop?")
        bot_api.fail_next(
            "editMessageReplyMarkup",
            status=400,
            description="Bad Request: message to edit not found",
        )
        model_server.enqueue(OTHER)
        second = await ask(bot, "A cheap one")
        stored = await bot.runtime.store.load_active(f"tg:{USER}")
        assert stored is not None
        calls, messages = len(model_server.requests), len(sent(bot, USER))

        assert await press_popup(bot, final_now(first), first) == STALE

        await ask(bot, "/reset")
        messages += 1
        assert await press_popup(bot, final_now(second), second) == STALE
        assert await bot.runtime.store.load_active(f"tg:{USER}") is None
        assert (len(model_server.requests), len(sent(bot, USER))) == (calls, messages)

        model_server.enqueue(ONE)
        third = await ask(bot, "Which phone?")
        model_server.enqueue("Take the small one.")
        assert await press_popup(bot, final_now(third), third) == ""
        await wait_sent(bot, USER, messages + 2)
        assert sent(bot, USER)[-1].params["text"].startswith("Take the small one.")
        assert "Final answer" in sent(bot, USER)[-1].params["text"]
        assert message_id(second) in taken_away(bot)


async def test_a_store_that_refuses_the_keyboard_message_never_fails_the_new_round(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The database refuses every write of `round_keyboards` (a trigger): the rounds are
    delivered all the same, with their buttons, and no error reaches the chat."""
    db = tmp_path / "bot.sqlite3"
    async with started_bot(db, bot_api, model_server, **settings()) as bot:
        with sqlite3.connect(db) as connection:
            for event in ("INSERT", "UPDATE", "DELETE"):
                connection.execute(
                    f"CREATE TRIGGER refuse_{event.lower()} BEFORE {event} ON round_keyboards"
                    " BEGIN SELECT RAISE(ABORT, 'refused'); END"
                )
        model_server.enqueue(ONE)
        first = await ask(bot, "Which laptop?")
        model_server.enqueue(OTHER)
        second = await ask(bot, "A cheap one")
        assert "Got it." in first.params["text"] and "And one more." in second.params["text"]
        assert markup_of(bot_api, first) is not None and markup_of(bot_api, second) is not None
        assert len(sent(bot, USER)) == 2
