"""One Telegram update handled twice by the bot (a worker that died after answering, its
update then handled by another): the model is called once, the history holds the turn
once, and the user gets the stored reply again.

The first handling goes the usual way (getUpdates from the fake Bot API); the second
feeds the very same update JSON to `Application.process_update`, as a worker taking it
from a shared queue does — the fake's getUpdates never hands out an update twice.
"""

from __future__ import annotations

import copy
from typing import Any

from telegram import Update

from tests.bot_harness import RunningBot, wait_sent

CHAT = 501


async def handle_again(bot: RunningBot, update: dict[str, Any]) -> None:
    """Handle the same update (same update_id) a second time, to the end."""
    await bot.application.process_update(Update.de_json(copy.deepcopy(update), bot.application.bot))


async def user_turns(bot: RunningBot) -> list[tuple[str, str | None]]:
    """Every user message of the chat's latest consultation with its turn id."""
    found = (await bot.runtime.store.load_turn(f"tg:{CHAT}", "tg:1"))[0]
    assert found is not None
    return [(m.text, m.turn_id) for m in found.consultation.messages if m.role.value == "user"]


async def test_a_message_handled_twice_is_answered_once_and_delivered_again(
    bot: RunningBot,
) -> None:
    bot.model.enqueue("Which workload?")
    update = bot.api.push_update(bot.api.text_message(CHAT, "Pick a database", user_id=CHAT))
    assert update["update_id"] == 1
    first = await wait_sent(bot, CHAT, 1)

    await handle_again(bot, update)

    texts = await wait_sent(bot, CHAT, 2)
    assert texts[1] == first[0]
    assert "Which workload?" in texts[1]
    assert len(bot.model.requests) == 1
    assert await user_turns(bot) == [("Pick a database", "tg:1")]


async def test_the_answer_command_handled_twice_gives_the_same_final_answer(
    bot: RunningBot,
) -> None:
    bot.model.enqueue("Which workload?")
    bot.model.enqueue("Use PostgreSQL.")
    bot.api.push_update(bot.api.text_message(CHAT, "Pick a database", user_id=CHAT))
    await wait_sent(bot, CHAT, 1)
    command = bot.api.push_update(bot.api.text_message(CHAT, "/answer", user_id=CHAT))
    final = await wait_sent(bot, CHAT, 2)
    assert "Use PostgreSQL." in final[1]

    await handle_again(bot, command)

    texts = await wait_sent(bot, CHAT, 3)
    assert texts[2] == final[1]
    assert len(bot.model.requests) == 2
    turns = await user_turns(bot)
    assert [turn for _, turn in turns] == ["tg:1", f"tg:{command['update_id']}"]


async def test_the_answer_button_pressed_once_and_handled_twice_answers_once(
    bot: RunningBot,
) -> None:
    bot.model.enqueue("Which workload?")
    bot.model.enqueue("Use PostgreSQL.")
    bot.api.push_update(bot.api.text_message(CHAT, "Pick a database", user_id=CHAT))
    await wait_sent(bot, CHAT, 1)
    question = next(c for c in bot.api.calls_of("sendMessage") if c.result is not None)
    press = bot.api.push_update(
        bot.api.callback_query(CHAT, CHAT, "answer", question.result["message_id"])
    )
    final = await wait_sent(bot, CHAT, 2)

    await handle_again(bot, press)

    texts = await wait_sent(bot, CHAT, 3)
    assert texts[2] == final[1]
    assert "Use PostgreSQL." in texts[2]
    assert len(bot.model.requests) == 2
    assert len(await user_turns(bot)) == 2
