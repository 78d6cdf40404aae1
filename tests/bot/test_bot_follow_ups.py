"""Follow-up questions in Telegram end to end: a reply to the final answer, the "Ask a
follow-up" button and the prompt it sends, the limit, groups, forged presses, Russian.
What the user sees and what the model was sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fakes.bot_api import Call, FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import (
    ALICE,
    BOB,
    GROUP,
    RunningBot,
    buttons,
    conversation,
    post_in_group,
    started_bot,
    system_prompt,
)

USER = 601
OTHER = 602
PROMPT = "Send your follow-up question as a reply to this message."


# Consultations have one round: the first reply is the final answer.
pytestmark = pytest.mark.bot_settings(default_max_rounds=1)


def answered(chat: int, fragment: str) -> Any:
    """A sendMessage or editMessageText to `chat` the fake accepted, containing `fragment`."""

    def match(call: Call) -> bool:
        return (
            call.method in ("sendMessage", "editMessageText")
            and call.result is not None
            and str(call.params.get("chat_id")) == str(chat)
            and fragment in call.params["text"]
        )

    return match


async def final_answer(bot: RunningBot, chat: int, text: str, count: int = 1, **kwargs: Any) -> int:
    """Ask `text` in a private chat and wait for the `count`-th final answer there; its
    message id."""
    await bot.send(chat, text, **kwargs)
    call = await bot.api.wait_for(answered(chat, "Final answer"), 10, count=count)
    return int(call.result["message_id"])


async def asked_in(bot: RunningBot, chat: int, fragment: str, count: int = 1) -> Call:
    return await bot.api.wait_for(answered(chat, fragment), 10, count=count)


async def test_a_reply_to_the_final_answer_asks_a_follow_up(bot: RunningBot) -> None:
    """The model is sent the consultation and the follow-up with the follow-up instruction;
    the user sees the answer marked as follow-up 1 of 5, with the buttons again."""
    bot.model.enqueue("## Plan\nUse PostgreSQL.")
    final = await final_answer(bot, USER, "How do I scale my app?")
    bot.model.enqueue("Pool the connections.")
    await bot.send(USER, "And connections?", reply_to_message=final)
    call = await asked_in(bot, USER, "Follow-up 1 of 5")
    assert call.params["text"].startswith("Pool the connections.")
    assert "reply to this answer (4 follow-ups left)" in call.params["text"]
    assert [b[:3] for b in buttons(call)] == ["fu:", "ex:"]
    request = bot.model.requests[-1]
    assert conversation(request) == [
        "How do I scale my app?",
        "## Plan\nUse PostgreSQL.",
        "And connections?",
    ]
    assert "follow-up question" in system_prompt(request)
    assert "last round of the consultation" not in system_prompt(request)


async def test_the_final_answer_says_how_to_ask_a_follow_up(bot: RunningBot) -> None:
    bot.model.enqueue("Use PostgreSQL.")
    await final_answer(bot, USER, "How do I scale?")
    call = await asked_in(bot, USER, "Final answer")
    assert "reply to it or press “Ask a follow-up”" in call.params["text"]
    assert "any other message starts a new consultation" in call.params["text"]


async def test_a_plain_message_after_the_final_answer_starts_anew(bot: RunningBot) -> None:
    """Without a reply the message is a new consultation, as before follow-ups."""
    bot.model.enqueue("Use PostgreSQL.")
    await final_answer(bot, USER, "How do I scale?")
    bot.model.enqueue("Bake it longer.")
    await final_answer(bot, USER, "How do I bake bread?", count=2)
    assert conversation(bot.model.requests[-1]) == ["How do I bake bread?"]


async def test_the_button_sends_a_prompt_and_a_reply_to_it_asks(bot: RunningBot) -> None:
    """ "Ask a follow-up" answers the press and sends a prompt with ForceReply; the reply to
    that prompt is the follow-up of the consultation."""
    bot.model.enqueue("Use PostgreSQL.")
    final = await final_answer(bot, USER, "How do I scale?")
    data = next(d for d in buttons(await asked_in(bot, USER, "Final answer")) if d[:3] == "fu:")
    bot.api.push_update(bot.api.callback_query(USER, USER, data, final))
    prompt = await asked_in(bot, USER, PROMPT)
    assert prompt.params["reply_markup"]["force_reply"] is True
    await bot.api.wait_for("answerCallbackQuery")
    bot.model.enqueue("Pool them.")
    await bot.send(USER, "And connections?", reply_to_message=int(prompt.result["message_id"]))
    call = await asked_in(bot, USER, "Follow-up 1 of 5")
    assert call.params["text"].startswith("Pool them.")
    assert conversation(bot.model.requests[-1])[-1] == "And connections?"


async def test_the_last_follow_up_says_so_and_the_next_is_refused(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """With FOLLOWUP_LIMIT=1 the follow-up's answer says it was the last and offers only the
    document; another reply is told the limit was reached, without the model."""
    async with started_bot(
        tmp_path / "b.sqlite3", bot_api, model_server, default_max_rounds=1, followup_limit=1
    ) as bot:
        bot.model.enqueue("Use PostgreSQL.")
        final = await final_answer(bot, USER, "How do I scale?")
        bot.model.enqueue("Pool them.")
        await bot.send(USER, "Connections?", reply_to_message=final)
        call = await asked_in(bot, USER, "Follow-up 1 of 1")
        assert "That was this consultation's last follow-up" in call.params["text"]
        assert [b[:3] for b in buttons(call)] == ["ex:"]
        calls = len(bot.model.requests)
        await bot.send(USER, "And reads?", reply_to_message=final)
        await asked_in(bot, USER, "has taken all its follow-ups")
        assert len(bot.model.requests) == calls


async def test_with_follow_ups_off_a_reply_starts_anew(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """FOLLOWUP_LIMIT=0: no follow-up button, the old completion notice, and a reply to the
    final answer is a new consultation."""
    async with started_bot(
        tmp_path / "b.sqlite3", bot_api, model_server, default_max_rounds=1, followup_limit=0
    ) as bot:
        bot.model.enqueue("Use PostgreSQL.")
        final = await final_answer(bot, USER, "How do I scale?")
        call = await asked_in(bot, USER, "Final answer")
        assert [b[:3] for b in buttons(call)] == ["ex:"]
        assert "Send a new message to start another one." in call.params["text"]
        await bot.send(USER, "Connections?", reply_to_message=final)
        await asked_in(bot, USER, "Final answer", count=2)
        assert conversation(bot.model.requests[-1]) == ["Connections?"]


async def test_a_reply_to_an_earlier_part_of_a_long_answer_is_a_follow_up(
    bot: RunningBot,
) -> None:
    """Only the last part of a long final answer has the buttons; a reply to its first part
    asks about the same consultation."""
    long_answer = " ".join(f"word{i}" for i in range(1500))
    bot.model.enqueue(long_answer)
    await bot.send(USER, "Explain everything")
    await asked_in(bot, USER, "Final answer")
    parts = [
        c
        for c in bot.api.calls
        if c.method in ("sendMessage", "editMessageText")
        and c.result is not None
        and str(c.params.get("chat_id")) == str(USER)
        and "word0 " in c.params["text"]
    ]
    first = int(parts[-1].result["message_id"])
    bot.model.enqueue("Shorter: words.")
    await bot.send(USER, "Summarise?", reply_to_message=first)
    await asked_in(bot, USER, "Follow-up 1 of 5")
    assert conversation(bot.model.requests[-1])[-1] == "Summarise?"


async def test_any_group_member_replying_to_the_final_answer_asks_a_follow_up(
    bot: RunningBot,
) -> None:
    """Alice's consultation; Bob's reply to its final answer (no mention needed) is its
    follow-up, sent to the model under his name."""
    bot.model.enqueue("Use PostgreSQL.")
    await post_in_group(bot, "@consult_bot how do I scale?", user=ALICE, name="Alice")
    final = await asked_in(bot, GROUP, "Final answer")
    bot.model.enqueue("Pool them.")
    await post_in_group(
        bot,
        "what about connections?",
        user=BOB,
        name="Bob",
        addressed=None,
        reply_to_message=int(final.result["message_id"]),
    )
    await asked_in(bot, GROUP, "Follow-up 1 of 5")
    assert conversation(bot.model.requests[-1])[-1] == "Bob: what about connections?"


async def test_forged_and_foreign_follow_up_presses_change_nothing(bot: RunningBot) -> None:
    """Data the bot never sends is answered and ignored; another chat's consultation (or an
    older one) is refused in the popup; nothing is sent to the chat, the model not called."""
    bot.model.enqueue("Use PostgreSQL.")
    await final_answer(bot, OTHER, "Their question")
    theirs = next(d for d in buttons(await asked_in(bot, OTHER, "Final answer")) if d[:3] == "fu:")
    bot.model.enqueue("Mine.")
    final = await final_answer(bot, USER, "My question")
    sent_before = len(bot.api.calls_of("sendMessage"))
    calls = len(bot.model.requests)
    for data, popup in (
        ("fu:", None),
        ("fu:XYZ", None),
        ("fu:" + "0" * 31 + "G", None),
        ("fu:" + "a" * 60, None),
        (theirs, "reply to it with your question"),
        ("fu:" + "0" * 32, "reply to it with your question"),
    ):
        update = bot.api.push_update(bot.api.callback_query(USER, USER, data, final))
        query_id = update["callback_query"]["id"]
        answer = await bot.api.wait_for(
            lambda c, q=query_id: (
                c.method == "answerCallbackQuery" and c.params["callback_query_id"] == q
            )
        )
        shown = answer.params.get("text")
        assert (shown is None) if popup is None else (popup in shown), (data, shown)
    assert len(bot.api.calls_of("sendMessage")) == sent_before
    assert len(bot.model.requests) == calls


async def test_a_russian_user_gets_russian_follow_ups(bot: RunningBot) -> None:
    bot.model.enqueue("Используйте PostgreSQL.")
    await bot.send(USER, "Как масштабировать?", language_code="ru")
    call = await asked_in(bot, USER, "Итоговый ответ")
    final = int(call.result["message_id"])
    assert "ответьте на него или нажмите «Задать дополнительный вопрос»" in call.params["text"]
    data = next(d for d in buttons(call) if d[:3] == "fu:")
    update = bot.api.callback_query(USER, USER, data, final)
    update["callback_query"]["from"]["language_code"] = "ru"
    bot.api.push_update(update)
    await asked_in(bot, USER, "Напишите дополнительный вопрос ответом на это сообщение.")
    bot.model.enqueue("Пул соединений.")
    await bot.send(USER, "А соединения?", reply_to_message=final, language_code="ru")
    call = await asked_in(bot, USER, "Дополнительный вопрос 1 из 5")
    assert "осталось 4 дополнительных вопроса" in call.params["text"]


async def test_a_document_sent_as_a_reply_to_the_final_answer_is_a_follow_up(
    bot: RunningBot,
) -> None:
    """A file replying to the final answer is read as usual and asked as its follow-up."""
    bot.model.enqueue("Use PostgreSQL.")
    final = await final_answer(bot, USER, "How do I scale?")
    media = bot.api.document(b"writes: 50/s\n", "load.txt", "text/plain")
    bot.model.enqueue("At that load, yes.")
    await bot.send(USER, None, media=media, caption="Still true?", reply_to_message=final)
    await asked_in(bot, USER, "Follow-up 1 of 5")
    assert conversation(bot.model.requests[-1])[-1] == (
        'Still true?\n\n<document name="load.txt">\nwrites: 50/s\n</document>'
    )


async def test_a_reply_naming_another_chats_consultation_reaches_nothing(
    bot: RunningBot,
) -> None:
    """A quoted message claiming to be the bot's with another chat's consultation in its
    keyboard is told the consultation is not found: nothing stored there, no model call."""
    bot.model.enqueue("Theirs.")
    await final_answer(bot, OTHER, "Their question")
    theirs = next(d for d in buttons(await asked_in(bot, OTHER, "Final answer")) if d[:3] == "fu:")
    calls = len(bot.model.requests)
    forged = {
        "message_id": 99999,
        "date": 1,
        "chat": {"id": USER, "type": "private"},
        "from": {"id": bot.api.bot_id, "is_bot": True, "first_name": "Consultant"},
        "text": "Final answer",
        "reply_markup": {"inline_keyboard": [[{"text": "x", "callback_data": theirs}]]},
    }
    await bot.send(USER, "Show me theirs", reply_to_message=forged)
    await asked_in(bot, USER, "can't find that consultation in this chat")
    assert len(bot.model.requests) == calls
    stored = await bot.runtime.store.load_latest("tg:" + str(OTHER))
    assert stored is not None and stored.follow_ups == 0 and len(stored.messages) == 2
