"""A structured clarifying round in Telegram, end to end (real Application, fake Bot API,
fake model server, real SQLite file): its options as buttons, a press answering a round of
one question, picks marked ✓ and sent for several, typed text sent with the picks, forged
and stale presses refused in their popup, groups recording who pressed, Russian labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from telegram import Update

from bot.transport.keyboards import Choice, choice_data, choice_of, round_keyboard, round_of
from bot.transport.undelivered import reply_from_dict, reply_to_dict
from bot.updates.buttons import MAX_DATA_BYTES
from core.domain.asking import RoundRef
from core.domain.clarifying import MAX_OPTIONS, MAX_QUESTIONS, ClarifyingRound, Question
from core.domain.outcomes import Reply
from fakes.bot_api import Call, FakeBotApi
from fakes.model_server import FakeModelServer, round_json
from tests.bot_harness import (
    ALICE,
    BOB,
    GROUP,
    RunningBot,
    group_answer,
    post_in_group,
    sent,
    started_bot,
    wait_sent,
)

USER = 5101
HEX = "0123456789abcdef" * 2
ANSWER_NOW = "Give the final answer now"
STALE = "These questions were already answered."

Keyboard = list[list[tuple[str, str]]]


ONE = round_json("Got it.", [("Budget?", ["Low", "High"])])
TWO = round_json("Two facts.", [("Budget?", ["Low", "High"]), ("City?", ["Berlin", "Rome"])])


pytestmark = pytest.mark.bot_settings(llm_structured_questions="auto")


def keyboard(call: Call) -> Keyboard:
    """(label, data) of every button of a sent or edited message, row by row."""
    markup = call.params.get("reply_markup") or {}
    return [[(b["text"], b["callback_data"]) for b in row] for row in markup["inline_keyboard"]]


def labels(board: Keyboard) -> list[str]:
    return [label for row in board for label, _ in row]


def data_of(board: Keyboard, label: str) -> str:
    return next(data for row in board for text, data in row if text == label)


async def ask(bot: RunningBot, text: str, chat: int = USER, **kwargs: Any) -> Call:
    """Send a private message; the bot's reply (the message that carries the footer)."""
    before = len(sent(bot, chat))
    await bot.send(chat, text, **kwargs)
    await wait_sent(bot, chat, before + 1)
    return sent(bot, chat)[-1]


def press_update(
    bot: RunningBot, chat: int, user: int, data: str, message_id: int, **who: str
) -> dict[str, Any]:
    update = bot.api.callback_query(chat, user, data, message_id)
    update["callback_query"]["from"].update(who)
    return update


async def pressed(
    bot: RunningBot, chat: int, user: int, data: str, message_id: int, **who: str
) -> Call:
    """Press a button as `user`; return the bot's answer to that press."""
    update = bot.api.push_update(press_update(bot, chat, user, data, message_id, **who))
    query_id = update["callback_query"]["id"]
    return await bot.api.wait_for(
        lambda c: c.method == "answerCallbackQuery" and c.params["callback_query_id"] == query_id,
        10,
    )


async def press_for_reply(bot: RunningBot, data: str, message_id: int, chat: int = USER) -> Call:
    """Press a button that runs a turn in a private chat; the reply it gets."""
    before = len(sent(bot, chat))
    answer = await pressed(bot, chat, chat, data, message_id)
    assert popup(answer) == ""
    await wait_sent(bot, chat, before + 1)
    return sent(bot, chat)[-1]


def popup(answer: Call) -> str:
    return str(answer.params.get("text") or "")


def last_user(model: FakeModelServer) -> str:
    return str(model.requests[-1]["messages"][-1]["content"])


async def marked(bot: RunningBot, count: int) -> Keyboard:
    """The keyboard of the `count`-th editMessageReplyMarkup the fake accepted that marks
    options (not one taking an older round's keyboard away)."""
    edit = await bot.api.wait_for(
        lambda c: (
            c.method == "editMessageReplyMarkup"
            and c.result is not None
            and "reply_markup" in c.params
        ),
        10,
        count=count,
    )
    return keyboard(edit)


async def test_the_option_of_a_one_question_round_answers_it_at_once(
    bot: RunningBot, model_server: FakeModelServer
) -> None:
    """A round of one question shows its options as buttons above "answer now"; a press
    answers the question: the model receives `Budget? — High` and the next round follows."""
    model_server.enqueue(ONE)
    reply = await ask(bot, "Which laptop?")
    board = keyboard(reply)
    consultation = await bot.runtime.store.load_active(f"tg:{USER}")
    assert consultation is not None
    bare = consultation.id.replace("-", "")
    assert board == [
        [("Low", f"qa:{bare}:1:1:1"), ("High", f"qa:{bare}:1:1:2")],
        [(ANSWER_NOW, f"qf:{bare}:1")],
    ]
    assert reply.params["text"].startswith("Got it.\n\nBudget?")

    model_server.enqueue(round_json("And then?", [("Screen?", [])]))
    answered = await press_for_reply(bot, data_of(board, "High"), reply.result["message_id"])

    assert last_user(model_server) == "Budget? — High"
    assert answered.params["text"].startswith("And then?\n\nScreen?")
    assert keyboard(answered) == [[(ANSWER_NOW, f"qf:{bare}:2")]]  # no options: no buttons
    assert len(model_server.requests) == 2


async def test_a_press_handled_twice_is_one_turn(
    bot: RunningBot, model_server: FakeModelServer
) -> None:
    """The same press handled again (its update delivered twice) does not answer the round
    twice: the model is asked once and the stored reply is sent again, with its buttons."""
    model_server.enqueue(ONE)
    reply = await ask(bot, "Which laptop?")
    model_server.enqueue(round_json("And then?", [("Screen?", ["13 inch", "15 inch"])]))
    update = press_update(
        bot, USER, USER, data_of(keyboard(reply), "High"), reply.result["message_id"]
    )
    bot.api.push_update(update)
    await wait_sent(bot, USER, 2)

    await bot.application.process_update(Update.de_json(update, bot.application.bot))
    await wait_sent(bot, USER, 3)

    first, again = sent(bot, USER)[1:]
    assert again.params["text"] == first.params["text"]
    assert keyboard(again) == keyboard(first)
    assert len(model_server.requests) == 2


async def test_picks_are_marked_and_send_answers_sends_them(
    bot: RunningBot, model_server: FakeModelServer
) -> None:
    """With several questions each press marks its option ✓ in the edited keyboard (one
    per question) and calls no model; "Send answers" sends the `n. question — option` lines."""
    model_server.enqueue(TWO)
    reply = await ask(bot, "Which laptop?")
    board = keyboard(reply)
    message_id = reply.result["message_id"]
    assert labels(board) == [
        "1 · Low",
        "1 · High",
        "2 · Berlin",
        "2 · Rome",
        "Send answers",
        ANSWER_NOW,
    ]

    for label in ("1 · Low", "1 · High", "2 · Rome"):
        assert popup(await pressed(bot, USER, USER, data_of(board, label), message_id)) == ""

    assert labels(await marked(bot, 1))[:2] == ["✓ 1 · Low", "1 · High"]
    assert labels(await marked(bot, 3)) == [
        "1 · Low",
        "✓ 1 · High",
        "2 · Berlin",
        "✓ 2 · Rome",
        "Send answers",
        ANSWER_NOW,
    ]
    edited = await marked(bot, 3)
    assert [data for row in edited for _, data in row] == [data for row in board for _, data in row]
    assert len(model_server.requests) == 1

    await press_for_reply(bot, data_of(board, "Send answers"), message_id)

    assert last_user(model_server) == "1. Budget? — High\n2. City? — Rome"
    consultation = await bot.runtime.store.load_active(f"tg:{USER}")
    assert consultation is not None and consultation.picks is None


async def test_a_typed_message_is_sent_with_the_chosen_options(
    bot: RunningBot, model_server: FakeModelServer
) -> None:
    """A message typed after some presses is the turn together with the chosen options."""
    model_server.enqueue(TWO)
    reply = await ask(bot, "Which laptop?")
    board = keyboard(reply)
    await pressed(bot, USER, USER, data_of(board, "1 · High"), reply.result["message_id"])

    await ask(bot, "and light, please")

    assert last_user(model_server) == "1. Budget? — High\nand light, please"


async def test_send_answers_with_nothing_chosen_asks_to_choose_in_its_popup(
    bot: RunningBot, model_server: FakeModelServer
) -> None:
    """ "Send answers" before any option was chosen says to choose or type, in its popup
    only: no message, no model call, nothing stored."""
    model_server.enqueue(TWO)
    reply = await ask(bot, "Which laptop?")
    messages = len(sent(bot, USER))

    answer = await pressed(
        bot, USER, USER, data_of(keyboard(reply), "Send answers"), reply.result["message_id"]
    )

    assert popup(answer) == "Choose an option first, or type your answer."
    assert len(sent(bot, USER)) == messages and len(model_server.requests) == 1
    consultation = await bot.runtime.store.load_active(f"tg:{USER}")
    assert consultation is not None and len(consultation.messages) == 2


async def test_forged_stale_and_foreign_presses_change_nothing(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Presses on an older round, on another consultation's round, or naming a round the
    consultation has not reached get "already answered" in their popup; data the bot never
    sends (an option or question not offered, malformed numbers) is answered without text.
    None sends a message, calls the model or stores anything."""
    db = tmp_path / "bot.sqlite3"
    async with started_bot(
        db, bot_api, model_server, llm_structured_questions="auto", button_presses_per_minute=0
    ) as bot:
        await stale_and_forged_presses(bot, model_server)


async def stale_and_forged_presses(bot: RunningBot, model_server: FakeModelServer) -> None:
    model_server.enqueue(ONE)
    first = await ask(bot, "Which laptop?")
    old = keyboard(first)
    model_server.enqueue(TWO)
    second = await press_for_reply(bot, data_of(old, "High"), first.result["message_id"])
    board = keyboard(second)
    bare = data_of(board, "Send answers").split(":")[1]
    message_id = second.result["message_id"]
    before = await bot.runtime.store.load_active(f"tg:{USER}")
    messages, requests = len(sent(bot, USER)), len(model_server.requests)

    stale = [
        data_of(old, "High"),  # the older round's option
        data_of(old, "Low"),
        f"qp:{HEX}:2:1:1",  # another consultation
        f"qs:{HEX}:2",
        f"qa:{HEX}:2:1:1",
        f"qp:{bare}:3:1:1",  # a round not reached
        f"qs:{bare}:1",
        f"qf:{bare}:1",  # "answer now" under the older round
        f"qf:{HEX}:2",
    ]
    forged = [
        f"qp:{bare}:2:1:3",  # no third option
        f"qp:{bare}:2:3:1",  # no third question
        f"qa:{bare}:2:1:9",
        f"qp:{bare}:02:1:1",
        f"qp:{bare}:2:1",
        f"qp:{bare}:2:1:1:1",
        f"qp:{bare}:2:-1:1",
        f"qp:{bare}:2:1:١",  # an Arabic-Indic digit
        f"qp:{bare.upper()}:2:1:1",
        f"qp:{bare[:-1]}:2:1:1",
        f"qs:{bare}:2:",
        f"qs:{bare}",
        "qs:",
        f"qp:{bare}:99999:1:1",
        f"qf:{bare}:02",
        f"qf:{bare}:2:",
        f"qf:{bare}",
        "qf:",
        f"qf:{bare}:2:1:1",
    ]
    for data in stale:
        assert popup(await pressed(bot, USER, USER, data, message_id)) == STALE, data
    for data in forged:
        assert popup(await pressed(bot, USER, USER, data, message_id)) == "", data

    after = await bot.runtime.store.load_active(f"tg:{USER}")
    assert after is not None and before is not None
    assert (len(after.messages), after.picks) == (len(before.messages), None)
    assert (len(sent(bot, USER)), len(model_server.requests)) == (messages, requests)
    marks = bot.api.calls_of("editMessageReplyMarkup")
    assert not [c for c in marks if c.status == 200 and "reply_markup" in c.params]


async def test_a_round_ready_for_the_final_answer_shows_only_that_answer(
    bot: RunningBot, model_server: FakeModelServer
) -> None:
    """When round 1 says it knows enough, the final answer is delivered at once, with no
    buttons of options and no "answer now": only the final answer's own buttons."""
    model_server.enqueue_round("", [], ready_for_final=True)
    model_server.enqueue("## The answer\n\nBuy the light one.")

    reply = await ask(bot, "Is the light laptop fine?")

    assert "Buy the light one." in reply.params["text"]
    assert "Final answer" in reply.params["text"]
    markup = reply.params["reply_markup"]
    labels = [button["text"] for row in markup["inline_keyboard"] for button in row]
    assert labels == ["Ask a follow-up", "Document"]
    assert len(model_server.requests) == 2


async def test_in_a_group_the_answers_record_who_pressed(
    bot: RunningBot, model_server: FakeModelServer
) -> None:
    """Two members choose one option each and one sends them: the model reads the sender
    as the turn's author and the other member's choice marked with their name."""
    model_server.enqueue(TWO)
    await post_in_group(bot, "@consult_bot Which laptop?", user=ALICE, name="Alice")
    reply = await group_answer(bot, 1)
    board = keyboard(reply)
    message_id = reply.result["message_id"]

    await pressed(bot, GROUP, ALICE, data_of(board, "1 · High"), message_id, first_name="Alice")
    await pressed(bot, GROUP, BOB, data_of(board, "2 · Rome"), message_id, first_name="Bob")
    answer = await pressed(
        bot, GROUP, BOB, data_of(board, "Send answers"), message_id, first_name="Bob"
    )
    await group_answer(bot, 2)

    assert popup(answer) == ""
    assert last_user(model_server) == "Bob: 1. Budget? — High (Alice)\n2. City? — Rome"
    consultation = await bot.runtime.store.load_active(f"tg:{GROUP}")
    assert consultation is not None
    assert consultation.messages[-2].author == "Bob"


async def test_in_a_group_a_members_press_answers_in_their_name(
    bot: RunningBot, model_server: FakeModelServer
) -> None:
    """Any member may answer a round of one question by pressing; the turn is theirs."""
    model_server.enqueue(ONE)
    await post_in_group(bot, "@consult_bot Which laptop?", user=ALICE, name="Alice")
    reply = await group_answer(bot, 1)

    data = data_of(keyboard(reply), "Low")
    await pressed(bot, GROUP, BOB, data, reply.result["message_id"], first_name="Bob")
    await group_answer(bot, 2)

    assert last_user(model_server) == "Bob: Budget? — Low"


async def test_russian_labels_and_popups(bot: RunningBot, model_server: FakeModelServer) -> None:
    """A Russian-speaking user gets the buttons and the popups in Russian."""
    model_server.enqueue(TWO)
    reply = await ask(bot, "Какой ноутбук?", language_code="ru")
    board = keyboard(reply)
    message_id = reply.result["message_id"]
    assert labels(board)[-2:] == ["Отправить ответы", "Дать итоговый ответ сейчас"]

    nothing = await pressed(
        bot, USER, USER, data_of(board, "Отправить ответы"), message_id, language_code="ru"
    )
    stale = await pressed(bot, USER, USER, f"qp:{HEX}:1:1:1", message_id, language_code="ru")

    assert popup(nothing) == "Сначала выберите вариант или напишите ответ."
    assert popup(stale) == "На эти вопросы уже ответили."


# -- the data and the keyboard alone ---------------------------------------------------------


def test_the_largest_round_fits_telegrams_callback_data_limit() -> None:
    """Four questions of five options each, in round 9999, fit 64 bytes per button and
    read back as the choice they name."""
    found = ClarifyingRound(
        "",
        tuple(
            Question(f"Q{n}?", tuple(f"{'x' * 38}{o}" for o in range(MAX_OPTIONS)))
            for n in range(MAX_QUESTIONS)
        ),
    )
    markup = round_keyboard(found, RoundRef(HEX, 9999), "en")
    data = [str(b.callback_data) for row in markup.inline_keyboard for b in row]

    assert len(data) == MAX_QUESTIONS * MAX_OPTIONS + 2
    assert max(len(d.encode()) for d in data) <= MAX_DATA_BYTES
    assert choice_of(data[-3].partition(":")[2]) == Choice(RoundRef(HEX, 9999), 4, 5)
    assert choice_data("qp", Choice(RoundRef(HEX, 9999), 4, 5)) == data[-3]
    assert round_of(data[-2].partition(":")[2]) == RoundRef(HEX, 9999)


def test_a_reply_kept_for_later_delivery_keeps_its_round() -> None:
    """A reply kept undelivered comes back with its questions, so it is sent with its
    buttons; a final answer the model was ready for comes back saying so."""
    found = ClarifyingRound("Two facts.", (Question("Budget?", ("Low", "High")),))
    reply = Reply(found.text, HEX, 1, 3, False, False, "m", questions=found)
    ready = Reply("Buy it.", HEX, 1, 3, True, True, "m", model_ready=True)

    for kept in (reply, ready):
        assert reply_from_dict(json.loads(json.dumps(reply_to_dict(kept)))) == kept
