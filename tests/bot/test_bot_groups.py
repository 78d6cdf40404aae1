"""Groups and forum topics end to end: who the bot listens to, where it answers, and how a
streamed answer shows up in a group.

Every "ignored" check is followed by an addressed message in the same conversation: updates
of one conversation are handled in order, so once that one is answered the ignored one was
handled too (no sleeps).
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

import pytest

from fakes.bot_api import NOT_MODIFIED, Call, FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import (
    ALICE,
    BOB,
    GROUP,
    RunningBot,
    bot_settings,
    group_answer,
    group_said,
    group_texts,
    in_chat,
    mention,
    post_in_group,
    running_bot,
    started_bot,
)


class StartBot(Protocol):
    """Starts a bot given the seconds between group progress edits."""

    def __call__(self, *, group_interval: float) -> AbstractAsyncContextManager[RunningBot]: ...


async def test_only_addressed_messages_are_answered_and_members_are_named(
    bot: RunningBot,
) -> None:
    """Plain messages and replies to other members are ignored; mentions (any case) and
    replies to the bot continue one consultation whose model input names each speaker."""
    bot.model.enqueue("How many people?")
    bot.model.enqueue("Which dates?")
    await post_in_group(bot, "we should plan a trip", addressed=None)
    question = await post_in_group(bot, "@consult_bot plan a trip to Rome")
    first = await group_answer(bot, 1)
    assert first.result["reply_to_message"]["message_id"] == question["message_id"]
    assert first.params["text"].startswith("How many people?")
    assert first.params["text"].endswith("Round 1 of 3")

    await post_in_group(
        bot,
        "ignore this",
        user=BOB,
        name="Bob",
        addressed=None,
        reply_to_message=question["message_id"],
    )
    answer = await post_in_group(
        bot,
        "Four of us",
        user=BOB,
        name="Bob",
        addressed=None,
        reply_to_message=first.result["message_id"],
    )
    second = await group_answer(bot, 2)
    assert second.result["reply_to_message"]["message_id"] == answer["message_id"]
    assert second.params["text"].endswith("Round 2 of 3")

    await post_in_group(bot, "@Consult_Bot, one more thing: in May", addressed="@Consult_Bot")
    await group_answer(bot, 3)
    assert len(bot.model.requests) == 3
    system, *sent = bot.model.requests[-1]["messages"]
    assert "group chat" in system["content"]
    assert [m["content"] for m in sent] == [
        "Alice: plan a trip to Rome",
        "How many people?",
        "Bob: Four of us",
        "Which dates?",
        "Alice: one more thing: in May",
    ]
    assert len(group_texts(bot)) == 3


async def test_forum_topics_are_separate_consultations(bot: RunningBot) -> None:
    """Two topics run two consultations, replies stay in their topic, and a message whose
    reply_to_message is the topic's root (created by the bot) is not a reply to the bot."""
    root = {
        "message_id": 70,
        "date": int(time.time()),
        "chat": bot.api.chat(GROUP, "supergroup", forum=True),
        "from": {
            "id": bot.api.bot_id,
            "is_bot": True,
            "first_name": "Consultant",
            "username": "consult_bot",
        },
        "message_thread_id": 70,
        "is_topic_message": True,
        "forum_topic_created": {"name": "Travel", "icon_color": 7322096},
    }
    topic = {"is_topic_message": True, "reply_to_message": root}
    await post_in_group(
        bot, "just chatting in the topic", addressed=None, message_thread_id=70, **topic
    )
    await post_in_group(bot, "@consult_bot plan a trip", message_thread_id=70, **topic)
    travel = await group_answer(bot, 1)
    await post_in_group(
        bot,
        "@consult_bot fix my bike",
        user=BOB,
        name="Bob",
        message_thread_id=90,
        is_topic_message=True,
    )
    bikes = await group_answer(bot, 2)
    assert travel.params["message_thread_id"] == 70
    assert bikes.params["message_thread_id"] == 90
    assert travel.params["text"].endswith("Round 1 of 3")
    assert bikes.params["text"].endswith("Round 1 of 3")
    assert [len(r["messages"]) for r in bot.model.requests] == [2, 2]
    assert bot.model.requests[1]["messages"][1]["content"] == "Bob: fix my bike"

    await post_in_group(
        bot,
        "for two people",
        addressed=None,
        message_thread_id=70,
        is_topic_message=True,
        reply_to_message=travel.result["message_id"],
    )
    again = await group_answer(bot, 3)
    assert again.params["message_thread_id"] == 70
    assert again.params["text"].endswith("Round 2 of 3")
    # Round 2 of the travel topic took its round 1's buttons away, not the bike topic's.
    taken = await bot.api.wait_for("editMessageReplyMarkup", 10)
    assert taken.params["message_id"] == travel.result["message_id"]
    assert "reply_markup" not in taken.params
    assert len(bot.api.calls_of("editMessageReplyMarkup")) == 1
    status = await bot.runtime.engine.turns.status(f"tg:{GROUP}:90")
    assert status.rounds_done == 1
    assert all("chatting" not in m["content"] for r in bot.model.requests for m in r["messages"])


async def test_plain_group_without_topics(bot: RunningBot) -> None:
    """A basic group (not a supergroup) answers a mention in place, without a thread id."""
    question = await post_in_group(bot, "@consult_bot hello", chat=-555, chat_type="group")
    reply = await group_answer(bot, 1, chat=-555)
    assert "message_thread_id" not in reply.params
    assert reply.result["reply_to_message"]["message_id"] == question["message_id"]


async def test_a_long_answer_in_a_topic_stays_in_the_topic(bot: RunningBot) -> None:
    """Every part of a split answer goes to the topic; only the first replies to the question."""
    paragraphs = [f"Paragraph {n}: " + "word " * 30 for n in range(60)]
    bot.model.enqueue("\n\n".join(paragraphs))
    question = await post_in_group(
        bot, "@consult_bot explain everything", message_thread_id=70, is_topic_message=True
    )
    await group_answer(bot, 1)
    sends = [c for c in bot.api.calls_of("sendMessage") if in_chat(c, GROUP)]
    assert len(sends) >= 2
    assert all(c.params["message_thread_id"] == 70 for c in sends)
    assert sends[0].params["reply_parameters"]["message_id"] == question["message_id"]
    assert all("reply_parameters" not in c.params for c in sends[1:])
    shown = "\n".join(bot.api.messages[(GROUP, c.result["message_id"])]["text"] for c in sends)
    assert all(p.strip() in shown for p in paragraphs)
    assert "reply_markup" in sends[-1].params  # the answer-now button under the last part


async def test_answer_now_button_in_a_topic(bot: RunningBot) -> None:
    """Another member pressing "final answer now" gets the final answer in the same topic."""
    await post_in_group(
        bot, "@consult_bot plan a trip", message_thread_id=70, is_topic_message=True
    )
    first = await group_answer(bot, 1)
    bot.api.push_update(bot.api.callback_query(GROUP, BOB, "answer", first.result["message_id"]))
    final = await group_answer(bot, 2)
    assert final.params["message_thread_id"] == 70
    assert "Final answer" in final.params["text"]
    system, *sent = bot.model.requests[-1]["messages"]
    assert "last round" in system["content"] and "\n> plan a trip\n" in system["content"]
    assert sent[-1]["content"].endswith(": Please give me your final answer now.")


async def test_reply_threads_outside_forums_are_not_topics(bot: RunningBot) -> None:
    """In a group without topics a reply carries the thread root's id, yet it continues the
    group's one consultation and the answer is sent without a thread id."""
    question = await post_in_group(bot, "@consult_bot plan a trip")
    first = await group_answer(bot, 1)
    await post_in_group(
        bot,
        "Four of us",
        user=BOB,
        name="Bob",
        addressed=None,
        message_thread_id=question["message_id"],
        reply_to_message=first.result["message_id"],
    )
    second = await group_answer(bot, 2)
    assert second.params["text"].endswith("Round 2 of 3")
    assert "message_thread_id" not in second.params


async def test_a_captioned_photo_mentioning_the_bot_is_a_question(bot: RunningBot) -> None:
    """A photo whose caption mentions the bot is answered from the caption; a sticker that is
    not addressed to the bot is ignored, one that replies to it gets the text-only hint."""
    caption = "@consult_bot is this mould?"
    await bot.send(
        GROUP,
        None,
        user_id=ALICE,
        chat_type="supergroup",
        photo=True,
        caption=caption,
        entities=mention(caption),
    )
    first = await group_answer(bot, 1)
    assert bot.model.requests[0]["messages"][-1]["content"] == "Alice: is this mould?"
    await bot.send(GROUP, None, user_id=BOB, chat_type="supergroup", sticker=True)
    await bot.send(
        GROUP,
        None,
        user_id=BOB,
        chat_type="supergroup",
        sticker=True,
        reply_to_message=first.result["message_id"],
    )
    await group_said(bot, "I can only read text")
    assert len(group_texts(bot)) == 2 and len(bot.model.requests) == 1


class HeldAnswer:
    """A final answer in three fragments (two continuations after the token limit); the
    second and third are held by the fake model until the test releases them, so the test
    decides what the progress message can show at each step (no sleeps)."""

    FRAGMENTS = (
        "## Plan\n\nFirst, book the flights early. ",
        "Second, pick a hotel near the centre. ",
        "Third, buy museum passes online.",
    )

    def __init__(self, model: FakeModelServer) -> None:
        self.second, self.third = asyncio.Event(), asyncio.Event()
        first, second, third = self.FRAGMENTS
        model.enqueue(first, finish_reason="length", chunk_size=len(first))
        model.enqueue(second, finish_reason="length", hold=self.second)
        model.enqueue(third, hold=self.third)


async def group_call(
    bot: RunningBot, method: str, fragment: str = "", *, status: int | None = None
) -> Call:
    """Wait for a `method` call to the group whose text holds `fragment` (and has `status`)."""
    return await bot.api.wait_for(
        lambda c: (
            c.method == method
            and c.params.get("chat_id") == GROUP
            and fragment in c.params.get("text", "")
            and (status is None or (c.status == status and (status != 200 or c.result is not None)))
        )
    )


@pytest.fixture
def final_only_bot(tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer) -> StartBot:
    """Starts a bot whose consultations have one round, so every answer is final, with
    group progress edits at least `group_interval` seconds apart (3 s in production)."""

    def start(*, group_interval: float) -> AbstractAsyncContextManager[RunningBot]:
        return started_bot(
            tmp_path / "bot.sqlite3",
            bot_api,
            model_server,
            default_max_rounds=1,
            group_progress_interval=group_interval,
        )

    return start


async def test_group_answer_streams_into_one_edited_message(final_only_bot: StartBot) -> None:
    """A slow answer appears as one progress message, edited no sooner than the group
    interval after it was sent, that ends holding the whole final text: no second copy."""
    async with final_only_bot(group_interval=1.0) as bot:
        bot_api = bot.api
        answer = HeldAnswer(bot.model)
        question = await post_in_group(bot, "@consult_bot plan my trip")
        await group_call(bot, "sendMessage", "First, book")
        answer.second.set()
        await group_call(bot, "editMessageText", "Second, pick")
        answer.third.set()
        final = await group_answer(bot, 1)
        sends = [c for c in bot_api.calls_of("sendMessage") if in_chat(c, GROUP)]
        edits = [c for c in bot_api.calls_of("editMessageText") if in_chat(c, GROUP)]
        assert len(sends) == 1 and len(edits) >= 2
        assert final is edits[-1]
        assert sends[0].result["reply_to_message"]["message_id"] == question["message_id"]
        assert "First, book" in sends[0].params["text"]
        assert edits[0].monotonic - sends[0].monotonic >= 1.0
        assert "Third" not in edits[0].params["text"]
        shown = bot_api.messages[(GROUP, sends[0].result["message_id"])]["text"]
        assert "First, book" in shown and shown.rstrip().endswith(
            "any other message starts a new consultation."
        )
        assert "Third, buy museum passes online." in shown


async def test_not_modified_on_a_progress_edit_is_harmless(final_only_bot: StartBot) -> None:
    """A progress edit refused as "message is not modified" neither breaks nor duplicates."""
    async with final_only_bot(group_interval=0.1) as bot:
        bot_api = bot.api
        bot_api.fail_next("editMessageText", status=400, description=NOT_MODIFIED)
        answer = HeldAnswer(bot.model)
        await post_in_group(bot, "@consult_bot plan my trip")
        await group_call(bot, "sendMessage", "First, book")
        answer.second.set()
        await group_call(bot, "editMessageText", status=400)
        answer.third.set()
        await group_answer(bot, 1)
        sends = [c for c in bot_api.calls_of("sendMessage") if in_chat(c, GROUP)]
        edits = bot_api.calls_of("editMessageText")
        assert len(sends) == 1
        assert edits[0].status == 400 and edits[-1].status == 200
        shown = bot_api.messages[(GROUP, sends[0].result["message_id"])]["text"]
        assert "Third, buy museum passes online." in shown and "Final answer" in shown


async def test_progress_is_formatted_and_falls_back_to_plain_text(
    final_only_bot: StartBot,
) -> None:
    """The progress message shows formatting, not raw Markdown; refused formatting is sent plain."""
    async with final_only_bot(group_interval=0.1) as bot:
        bot_api = bot.api
        bot_api.fail_next(
            "sendMessage", status=400, description="Bad Request: can't parse entities: x"
        )
        answer = HeldAnswer(bot.model)
        await post_in_group(bot, "@consult_bot plan my trip")
        await group_call(bot, "sendMessage", "First, book", status=200)
        answer.second.set()
        await group_call(bot, "editMessageText", "Second, pick", status=200)
        answer.third.set()
        await group_answer(bot, 1)
        refused, progress = bot_api.calls_of("sendMessage")
        assert refused.status == 400 and refused.params.get("entities")
        assert progress.status == 200 and not progress.params.get("entities")
        assert "##" not in refused.params["text"] and "Plan" in refused.params["text"]
        edits = bot_api.calls_of("editMessageText")
        formatted_edits = [c for c in edits if c.status == 200 and c.params.get("entities")]
        assert len(formatted_edits) >= 2  # the progress edit and the final one are formatted again
        assert all("##" not in c.params["text"] for c in formatted_edits)


async def test_refused_formatting_of_the_final_edit_is_edited_in_plain(
    final_only_bot: StartBot,
) -> None:
    """When Telegram refuses the formatting of the final edit, the progress message is
    edited again as plain text: it ends holding the whole answer, and no copy is sent."""
    # No progress edits: the only edits are the final one's.
    async with final_only_bot(group_interval=600) as bot:
        bot_api = bot.api
        bot_api.fail_next(
            "editMessageText", status=400, description="Bad Request: can't parse entities: x"
        )
        answer = HeldAnswer(bot.model)
        await post_in_group(bot, "@consult_bot plan my trip")
        await group_call(bot, "sendMessage", "First, book")
        answer.second.set()
        answer.third.set()
        final = await group_answer(bot, 1)
        sends = [c for c in bot_api.calls_of("sendMessage") if in_chat(c, GROUP)]
        refused, plain = bot_api.calls_of("editMessageText")
        assert len(sends) == 1
        assert refused.status == 400 and refused.params.get("entities")
        assert final is plain and not plain.params.get("entities")
        shown = bot_api.messages[(GROUP, sends[0].result["message_id"])]["text"]
        assert "Third, buy museum passes online." in shown and "Final answer" in shown


async def test_final_edit_that_fails_is_sent_as_a_new_message(final_only_bot: StartBot) -> None:
    """When the progress message cannot be edited (deleted meanwhile), the whole final
    answer arrives as a new message."""
    async with final_only_bot(group_interval=600) as bot:
        bot_api = bot.api
        bot_api.fail_next(
            "editMessageText", status=400, description="Bad Request: message to edit not found"
        )
        answer = HeldAnswer(bot.model)
        await post_in_group(bot, "@consult_bot plan my trip")
        await group_call(bot, "sendMessage", "First, book")
        answer.second.set()
        answer.third.set()
        final = await group_answer(bot, 1)
        _progress, copy = [c for c in bot_api.calls_of("sendMessage") if in_chat(c, GROUP)]
        assert final is copy
        assert "".join(HeldAnswer.FRAGMENTS[1:]) in copy.params["text"]
        assert "First, book the flights early." in copy.params["text"]
        assert "Final answer" in copy.params["text"]


async def test_group_upgraded_to_supergroup_keeps_its_consultation(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """When Telegram turns a group into a supergroup (new chat id), the consultation,
    its round and the group's /rounds choice carry over to the new id."""
    old, new = -555, -100555
    settings = bot_settings(tmp_path / "bot.sqlite3", bot_api, model_server)
    async with running_bot(settings, bot_api, model_server) as bot:
        bot_api.member_status[ALICE] = "administrator"
        await post_in_group(bot, "/rounds 4", chat=old, chat_type="group", addressed=None)
        await post_in_group(bot, "@consult_bot plan my trip", chat=old, chat_type="group")
        await group_answer(bot, 1, chat=old)
        bot_api.push_update(
            {
                "update_id": bot_api.next_update_id(),
                "message": {
                    "message_id": bot_api.next_message_id(),
                    "date": int(time.time()),
                    "chat": bot_api.chat(old, "group"),
                    "from": bot_api.user(ALICE),
                    "migrate_to_chat_id": new,
                },
            }
        )
        await bot.application.update_queue.join()
        await post_in_group(bot, "@consult_bot two weeks in May", chat=new)
        await group_answer(bot, 1, chat=new)
    system = model_server.requests[-1]["messages"][0]["content"]
    assert "round 2 of 4" in system
    contents = [m["content"] for m in model_server.requests[-1]["messages"][1:]]
    assert contents[0] == "Alice: plan my trip" and contents[-1] == "Alice: two weeks in May"


REPEATED_INPUTS = {
    # a mention with nothing else: the "empty" hint
    "empty mention": ({"text": "@consult_bot"}, "Your message is empty"),
    # a command naming the bot that it does not have
    "unknown command": ({"text": "/foo@consult_bot"}, "I don't know that command"),
    # a sticker replying to the bot's answer: the "text only" hint
    "sticker": ({"text": None, "sticker": True, "reply": True}, "I can only read text"),
    # a member the allow-list does not name
    "not allowed": ({"text": "@consult_bot hello"}, "not available here"),
    # an archive captioned with a mention: refused before it is fetched
    "archive": ({"text": "@consult_bot read this", "archive": True}, "kind of file"),
}


@pytest.mark.parametrize("kind", sorted(REPEATED_INPUTS))
async def test_a_member_repeating_refused_input_costs_the_group_one_message(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer, kind: str
) -> None:
    """Nine refused inputs in a row from one member are refused once in the group; another
    member's question is still answered."""
    fields, refusal = REPEATED_INPUTS[kind]
    allow_alice = {"allowed_user_ids": str(ALICE)} if kind == "not allowed" else {}
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server, **allow_alice) as bot:
        await post_in_group(bot, "@consult_bot plan a trip")
        first = await group_answer(bot, 1)
        reply = first.result["message_id"] if fields.get("reply") else None
        for _ in range(9):
            if fields.get("sticker"):
                await bot.send(
                    GROUP,
                    None,
                    user_id=BOB,
                    chat_type="supergroup",
                    sticker=True,
                    reply_to_message=reply,
                )
            elif fields.get("archive"):
                caption = str(fields["text"])
                archive = bot.api.document(
                    b"PK\x03\x04" + bytes(60), "photos.zip", "application/zip"
                )
                await bot.send(
                    GROUP,
                    None,
                    user_id=BOB,
                    chat_type="supergroup",
                    media=archive,
                    caption=caption,
                    entities=mention(caption),
                )
            else:
                await post_in_group(bot, str(fields["text"]), user=BOB, name="Bob")
        await post_in_group(bot, "@consult_bot in May")
        await group_answer(bot, 2)
        texts = group_texts(bot)
    assert len([t for t in texts if refusal in t]) == 1
    assert len(texts) == 3
