"""Delivery of answers in a private chat, end to end: splitting, formatting fallbacks,
continuation of cut-off answers, streaming drafts, Telegram's flood control, and replies
Telegram would not take, kept for the chat's next turn on whichever worker runs it."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import NetworkError, RetryAfter
from telegram.ext import ExtBot
from telegram.request import HTTPXRequest

from bot.commands.turns import TurnRunner
from bot.transport.delivery import Sender, with_footer
from bot.transport.progress import Live
from bot.transport.target import ChatUnavailable, Target
from bot.transport.undelivered import StoredUndelivered
from core.domain.outcomes import Reply
from fakes.bot_api import NOT_MODIFIED, TOKEN, FakeBotApi
from fakes.bot_api_checks import utf16_len
from fakes.model_server import FakeModelServer
from storage.postgres.cluster.pool import open_shared_pool
from storage.postgres.cluster.undelivered import PostgresUndelivered
from storage.postgres.store import PostgresStore
from tests.bot_harness import (
    FirstCallOnly,
    RunningBot,
    ask_private,
    button_kinds,
    delivered,
    sent,
    started_bot,
    wait_sent,
)
from tests.postgres import postgres_url  # noqa: F401  (fixture)

USER = 701
WORD = re.compile(r"w\d{4}")


def long_markdown(size: int = 10_000) -> str:
    """Numbered words (w0001…) in paragraphs with bold, lists and code blocks."""
    numbers = itertools.count(1)

    def words(k: int) -> str:
        return " ".join(f"w{next(numbers):04d}" for _ in range(k))

    blocks: list[str] = []
    while len("\n\n".join(blocks)) < size:
        blocks.append(f"Paragraph **{words(2)}** then {words(60)}.")
        blocks.append("\n".join(f"- item *{words(1)}* {words(4)}" for _ in range(4)))
        blocks.append("```python\n" + "\n".join(f"x = '{words(3)}'" for _ in range(3)) + "\n```")
    return "\n\n".join(blocks)


async def test_long_answer_is_split_in_order_with_everything(bot: RunningBot) -> None:
    """A 10,000-character answer arrives as several valid messages, every word in order."""
    markdown = long_markdown()
    bot.model.enqueue(markdown, chunk_size=500)
    await bot.send(USER, "Write it all")
    await bot.api.wait_for(  # parts go out one after another: the footer's part comes last
        lambda c: delivered(c, USER) and c.params["text"].endswith("Round 1 of 3")
    )
    calls = sent(bot, USER)
    assert len(calls) >= 3
    assert all(c.status == 200 for c in bot.api.calls_of("sendMessage"))  # none refused
    assert all(utf16_len(c.params["text"]) <= 4096 for c in calls)
    assert all(c.params.get("entities") for c in calls)  # formatted, and the fake accepted it
    assert WORD.findall("\n".join(c.params["text"] for c in calls)) == WORD.findall(markdown)
    assert "**" not in "".join(c.params["text"] for c in calls)
    assert calls[-1].params["text"].endswith("Round 1 of 3")
    assert not any("Round 1 of 3" in c.params["text"] for c in calls[:-1])
    assert [button_kinds(c) for c in calls] == [[]] * (len(calls) - 1) + [["qf"]]
    kinds = {e["type"] for c in calls for e in c.params["entities"]}
    assert {"bold", "pre", "italic"} <= kinds


def words_of_length(size: int) -> str:
    """Plain numbered words (nothing to format), exactly `size` characters long."""
    text = " ".join(f"w{n:04d}" for n in range(size // 5 + 1))[:size]
    assert len(text) == size and text == text.strip()
    return text


@pytest.mark.parametrize(("size", "parts"), [(4082, 1), (4083, 2)])
async def test_footer_joins_the_last_part_only_when_both_fit(
    bot: RunningBot, size: int, parts: int
) -> None:
    """The status line goes under the answer's last message when the two fit in Telegram's
    4096 characters (4082 + blank line + 12), and as its own message when they do not;
    Telegram never has to refuse a message for its length."""
    text = words_of_length(size)
    bot.model.enqueue(text)
    texts = await ask_private(bot, USER, "Go", parts=parts)
    assert texts == ([f"{text}\n\nRound 1 of 3"] if parts == 1 else [text, "Round 1 of 3"])
    assert [c.status for c in bot.api.calls_of("sendMessage")] == [200] * parts
    footer_at = utf16_len(texts[-1]) - len("Round 1 of 3")
    italic = {"type": "italic", "offset": footer_at, "length": len("Round 1 of 3")}
    assert bot.api.calls_of("sendMessage")[-1].params["entities"] == [italic]


def test_footer_alone_when_there_is_no_part() -> None:
    """Without any part to join, the status line is the one (italic) part."""
    [part] = with_footer([], "Final answer")
    assert part.text == "Final answer"
    assert [(e.type, e.offset, e.length) for e in part.entities] == [("italic", 0, 12)]


async def test_cut_off_final_answer_is_continued_and_merged(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """An answer cut by the token limit is continued; the user gets one merged message."""
    part1 = "Your plan: start with the basics and build up slowly over the first mo"
    part2 = "nth. Then add a second session each week."
    model_server.enqueue(part1, finish_reason="length")
    model_server.enqueue(part2)
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, default_max_rounds=1
    ) as bot:
        [answer] = await ask_private(bot, USER, "Make me a training plan")
        assert answer.startswith(part1 + part2)
        assert "Final answer" in answer and "may be incomplete" not in answer
        assert len(sent(bot, USER)) == 1
        second = bot.model.requests[1]["messages"]
        assert second[-2] == {"role": "assistant", "content": part1}
        assert second[-1]["role"] == "user"
        assert second[-1]["content"].startswith("Your previous answer was cut off.")


async def test_rejected_formatting_is_resent_as_plain_text(bot: RunningBot) -> None:
    """When Telegram refuses the entities, the same text arrives without formatting."""
    bot.model.enqueue("**Bold** advice with `code` in it")
    bot.api.fail_next(
        "sendMessage", status=400, description="Bad Request: can't parse entities: bad offset"
    )
    await ask_private(bot, USER, "Go")
    first, second = bot.api.calls_of("sendMessage")[:2]
    assert first.status == 400 and first.params.get("entities")
    assert second.status == 200 and not second.params.get("entities")
    assert second.params["text"] == first.params["text"]
    assert second.params["text"].startswith("Bold advice with code in it")


@pytest.mark.parametrize(
    "model_text",
    [
        "Use the <div> tag, then the </div> tag & a <br/> break.",
        "Remember that a < b and b > c, so a < c <= d.",
        "Unbalanced **bold and _italic and `backtick and ~~strike never closed.",
        "Stray __dunder__ names like __init__ and snake_case_words in text.",
        "<script>alert</script> and &amp; and &lt;tag&gt; literally.",
    ],
)
async def test_hostile_markdown_keeps_every_word(bot: RunningBot, model_text: str) -> None:
    """HTML-looking text and unbalanced Markdown arrive with every word the model wrote."""
    bot.model.enqueue(model_text)
    [reply] = await ask_private(bot, USER, "Explain")
    shown = reply.removesuffix("Round 1 of 3")
    assert re.findall(r"[A-Za-z]+", shown) == re.findall(r"[A-Za-z]+", model_text)
    for token in ("<div>", "<", "&"):
        if token in model_text:
            assert token in shown


async def test_slow_stream_shows_growing_drafts_then_the_message(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """While a final answer is still coming, drafts with its growing text come before the
    complete message. The model holds each continuation until the draft of the text so
    far was shown, so every step is seen whatever the machine's speed."""
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, default_max_rounds=1
    ) as bot:
        await _growing_drafts(bot)


async def _growing_drafts(bot: RunningBot) -> None:
    fragments = ["First, warm up for ten minutes. ", "Then lift. ", "Finally, stretch."]
    second, third = asyncio.Event(), asyncio.Event()
    bot.model.enqueue(fragments[0], finish_reason="length")
    bot.model.enqueue(fragments[1], finish_reason="length", hold=second)
    bot.model.enqueue(fragments[2], hold=third)
    await bot.send(USER, "Tell me")

    async def draft_with(text: str) -> None:
        await bot.api.wait_for(
            lambda c: c.method == "sendMessageDraft" and c.result and c.params["text"] == text
        )

    await draft_with(fragments[0].strip())
    second.set()
    await draft_with("".join(fragments[:2]).strip())
    third.set()
    [reply] = await wait_sent(bot, USER, 1)
    assert reply.startswith("".join(fragments) + "\n\nFinal answer")
    drafts = [c for c in bot.api.calls_of("sendMessageDraft") if c.status == 200]
    shown = [c.params["text"] for c in drafts]
    assert all(reply.startswith(s) for s in shown)
    assert all(len(a) < len(b) for a, b in itertools.pairwise(shown))
    final = sent(bot, USER)[-1]
    assert all(d.monotonic < final.monotonic for d in drafts)


async def test_flood_control_on_the_answer_waits_and_delivers(bot: RunningBot) -> None:
    """A 429 with retry_after 1 on the answer delays it by a second; it still arrives once."""
    bot.api.fail_next(
        "sendMessage", status=429, description="Too Many Requests: retry after 1", retry_after=1
    )
    [reply] = await ask_private(bot, USER, "Hello")
    assert reply.startswith("Reply to: Hello")
    limited, delivered = bot.api.calls_of("sendMessage")
    assert limited.status == 429 and delivered.status == 200
    assert delivered.monotonic - limited.monotonic >= 1.0
    assert delivered.params["text"] == limited.params["text"]


async def test_timed_out_send_is_retried(bot_api: FakeBotApi) -> None:
    """A send that times out is sent again and arrives.

    Through the running bot this would need the fake to stall for longer than the
    Application's 30 s read timeout, so the Sender is driven directly with a real Bot
    whose timeout is short. Telegram may have received the first request, so a retried
    send can duplicate a message: that is preferred to losing it.
    """
    request = HTTPXRequest(read_timeout=1.0, write_timeout=1.0, connect_timeout=1.0)
    async with Bot(TOKEN, base_url=bot_api.base_url, request=request) as bot:
        bot_api.latency = FirstCallOnly(sendMessage=3600)  # the first send stalls for good
        [message_id] = await asyncio.wait_for(
            Sender(bot, Target(USER)).send_text("Your answer"), 30
        )
    # A loaded machine may time out a retry too; the Sender's next attempt then sends it.
    stalled, *retried = bot_api.calls_of("sendMessage")
    assert stalled.result is None  # still stalled when the client gave up on it
    assert retried[-1].result is not None
    assert retried[-1].result["message_id"] == message_id
    assert {call.params["text"] for call in retried} == {"Your answer"}


# -- the Sender on its own: fallbacks that keep the reply, the button and every part ---------

GROUP_CHAT = -1001701
QUESTION_ID = 77
KEYBOARD = InlineKeyboardMarkup(
    [[InlineKeyboardButton("Final answer now", callback_data="answer")]]
)


@pytest.fixture
async def telegram(bot_api: FakeBotApi) -> AsyncIterator[Bot]:
    """A real PTB Bot talking to the fake Bot API."""
    async with Bot(TOKEN, base_url=bot_api.base_url) as bot:
        yield bot


def in_group(sender_bot: Bot) -> Sender:
    """A Sender answering the group's question 77 (replies quote it)."""
    return Sender(sender_bot, Target(GROUP_CHAT, reply_to=QUESTION_ID, private=False))


@pytest.mark.parametrize(
    "refusal",
    ["Bad Request: can't parse entities: bad offset", "Bad Request: message is too long"],
)
async def test_refused_part_is_resent_plain_with_its_reply_and_button(
    telegram: Bot, bot_api: FakeBotApi, refusal: str
) -> None:
    """A part Telegram refuses for its formatting or length is sent again as plain text,
    still quoting the question and still carrying the button."""
    bot_api.fail_next("sendMessage", status=400, description=refusal)
    [message_id] = await in_group(telegram).send_markdown("**Which** dates?", keyboard=KEYBOARD)
    refused, plain = bot_api.calls_of("sendMessage")
    assert refused.status == 400 and plain.status == 200
    assert plain.params["text"] == "Which dates?" and not plain.params.get("entities")
    assert plain.params["reply_parameters"]["message_id"] == QUESTION_ID
    assert plain.params["reply_markup"] == KEYBOARD.to_dict()
    assert plain.result["text"] == "Which dates?" and message_id == plain.result["message_id"]


async def test_final_edit_keeps_the_button(telegram: Bot, bot_api: FakeBotApi) -> None:
    """A one-part reply that replaces the progress message carries the button there."""
    progress = await telegram.send_message(GROUP_CHAT, "Which da")
    [message_id] = await in_group(telegram).send_markdown(
        "Which **dates**?", keyboard=KEYBOARD, edit=progress.message_id
    )
    [edit] = bot_api.calls_of("editMessageText")
    assert edit.params["reply_markup"] == KEYBOARD.to_dict()
    assert (
        edit.result["text"] == "Which dates?" and edit.result["reply_markup"] == KEYBOARD.to_dict()
    )
    assert message_id == progress.message_id
    assert len(bot_api.calls_of("sendMessage")) == 1  # only the progress message


async def test_final_edit_is_followed_by_every_other_part(
    telegram: Bot, bot_api: FakeBotApi
) -> None:
    """A long reply replaces the progress message with its first part and sends the rest;
    the button goes under the last part only. Every message is returned, in order."""
    markdown = long_markdown(9000)
    progress = await telegram.send_message(GROUP_CHAT, "Paragraph")
    messages = await in_group(telegram).send_markdown(
        markdown, keyboard=KEYBOARD, edit=progress.message_id
    )
    [edit] = bot_api.calls_of("editMessageText")
    sends = bot_api.calls_of("sendMessage")[1:]
    assert len(sends) >= 2
    assert messages == [progress.message_id] + [c.result["message_id"] for c in sends]
    shown = "\n".join(c.result["text"] for c in [edit, *sends])
    assert WORD.findall(shown) == WORD.findall(markdown)
    assert "reply_markup" not in edit.params
    assert [bool(c.params.get("reply_markup")) for c in sends] == [False] * (len(sends) - 1) + [
        True
    ]


async def test_final_edit_refused_as_not_modified_sends_nothing_more(
    telegram: Bot, bot_api: FakeBotApi
) -> None:
    """If the progress message already shows the final text ("message is not modified"),
    that message is the reply: no copy is sent."""
    progress = await telegram.send_message(GROUP_CHAT, "Done.")
    bot_api.fail_next("editMessageText", status=400, description=NOT_MODIFIED)
    [message_id] = await in_group(telegram).send_markdown("Done.", edit=progress.message_id)
    assert message_id == progress.message_id
    assert len(bot_api.calls_of("sendMessage")) == 1  # only the progress message


async def test_long_ui_text_quotes_once_and_keeps_the_button_last(
    telegram: Bot, bot_api: FakeBotApi
) -> None:
    """A UI text over 4096 characters is split; only the first part quotes the question
    (in its topic, even if the question is gone) and only the last carries the button."""
    sender = Sender(telegram, Target(GROUP_CHAT, thread_id=5, reply_to=QUESTION_ID, private=False))
    text = words_of_length(6001)
    messages = await sender.send_text(text, keyboard=KEYBOARD)
    first, last = bot_api.calls_of("sendMessage")
    assert messages == [first.result["message_id"], last.result["message_id"]]
    assert " ".join(c.result["text"] for c in (first, last)).split() == text.split()
    assert first.params["reply_parameters"] == {
        "message_id": QUESTION_ID,
        "allow_sending_without_reply": True,
    }
    assert "reply_parameters" not in last.params
    assert first.params["message_thread_id"] == last.params["message_thread_id"] == 5
    assert "reply_markup" not in first.params
    assert last.params["reply_markup"] == KEYBOARD.to_dict()


async def test_private_reply_quotes_nothing(telegram: Bot, bot_api: FakeBotApi) -> None:
    """In a private chat (no question to quote) a reply is a plain message."""
    await Sender(telegram, Target(USER)).send_markdown("**Hi**")
    [call] = bot_api.calls_of("sendMessage")
    assert "reply_parameters" not in call.params and "message_thread_id" not in call.params


async def test_a_failing_send_is_tried_exactly_the_given_number_of_times(
    telegram: Bot, bot_api: FakeBotApi
) -> None:
    """A 502 is retried: with two attempts one failure is survived, two are not."""
    sender = Sender(telegram, Target(USER), attempts=2)
    bot_api.fail_next("sendMessage", status=502, description="Bad Gateway")
    [message_id] = await sender.send_text("Your answer")
    failed, delivered_once = bot_api.calls_of("sendMessage")
    assert failed.status == 502 and delivered_once.result["text"] == "Your answer"
    assert message_id == delivered_once.result["message_id"]
    bot_api.fail_next("sendMessage", status=502, description="Bad Gateway", times=2)
    with pytest.raises(NetworkError):
        await sender.send_text("Lost")
    assert len(bot_api.calls_of("sendMessage")) == 4


async def test_flood_control_without_a_rate_limiter_waits_the_time_asked(
    telegram: Bot, bot_api: FakeBotApi
) -> None:
    """A 429 reaching the Sender is retried after the time Telegram asked for (and a
    little more), not sooner; with one attempt left it is raised."""
    bot_api.fail_next("sendMessage", status=429, description="Too Many Requests", retry_after=1)
    await Sender(telegram, Target(USER)).send_text("Your answer")
    limited, sent_after = bot_api.calls_of("sendMessage")
    assert sent_after.monotonic - limited.monotonic >= 1.05
    bot_api.fail_next("sendMessage", status=429, description="Too Many Requests", retry_after=1)
    with pytest.raises(RetryAfter):
        await Sender(telegram, Target(USER), attempts=1).send_text("Not now")


async def test_a_chat_that_blocked_the_bot_is_reported_at_once(
    telegram: Bot, bot_api: FakeBotApi
) -> None:
    """A 403 is not retried: it becomes ChatUnavailable carrying Telegram's reason."""
    bot_api.fail_next("sendMessage", status=403, description="Forbidden: bot was blocked")
    with pytest.raises(ChatUnavailable, match="bot was blocked"):
        await Sender(telegram, Target(USER)).send_text("Hello?")
    assert len(bot_api.calls_of("sendMessage")) == 1


# -- replies not delivered, kept for the chat's next turn on any worker ------------------------


@pytest.fixture
async def two_workers(postgres_url: str) -> AsyncIterator[tuple[TurnRunner, TurnRunner]]:  # noqa: F811
    """Two turn runners, each with its own pool on one database: two worker processes."""
    store = await PostgresStore.open(postgres_url)
    pools = [await open_shared_pool(postgres_url) for _ in range(2)]
    try:
        yield tuple(  # type: ignore[misc]
            TurnRunner(ttl_minutes=60, undelivered=StoredUndelivered(PostgresUndelivered(pool)))
            for pool in pools
        )
    finally:
        for pool in pools:
            await pool.close()
        await store.close()


async def test_a_reply_one_worker_could_not_deliver_is_sent_first_by_another(
    bot_api: FakeBotApi, two_workers: tuple[TurnRunner, TurnRunner]
) -> None:
    """Worker A stores the reply but Telegram fails every attempt; the chat's next turn
    runs on worker B, which sends A's reply before its own."""
    a, b = two_workers

    def answering(text: str, round_: int) -> Callable[[Live], Awaitable[Reply]]:
        async def action(live: Live) -> Reply:
            return Reply(text, "c1", round_, 3, is_final=False, is_complete=False, model="m")

        return action

    async with ExtBot(TOKEN, base_url=bot_api.base_url) as ext:
        bot_api.fail_next("sendMessage", status=502, description="Bad Gateway", times=4)
        await a.run(ext, Target(USER), "en", answering("First reply", 1))
        assert bot_api.sent_texts(USER) == []
        await b.run(ext, Target(USER), "en", answering("Second reply", 2))
        await a.run(ext, Target(USER), "en", answering("Third reply", 3))
    assert bot_api.sent_texts(USER) == [
        "First reply\n\nRound 1 of 3",
        "Second reply\n\nRound 2 of 3",
        "Third reply\n\nRound 3 of 3",
    ]


async def test_a_final_answer_cut_short_is_sent_by_another_worker_as_a_final_answer(
    bot_api: FakeBotApi, two_workers: tuple[TurnRunner, TurnRunner]
) -> None:
    """Worker A cannot deliver the final answer, which the model left unfinished; worker B
    sends it before its own turn labelled as the final answer, without the button asking
    for one and without claiming the consultation is complete."""
    a, b = two_workers

    def answering(reply: Reply) -> Callable[[Live], Awaitable[Reply]]:
        async def action(live: Live) -> Reply:
            return reply

        return action

    cut = Reply("The plan: run", "c1", 3, 3, is_final=True, is_complete=False, model="m")
    following = Reply("Start over?", "c2", 1, 3, is_final=False, is_complete=False, model="m")
    async with ExtBot(TOKEN, base_url=bot_api.base_url) as ext:
        bot_api.fail_next("sendMessage", status=502, description="Bad Gateway", times=4)
        await a.run(ext, Target(USER), "en", answering(cut))
        assert bot_api.sent_texts(USER) == []
        await b.run(ext, Target(USER), "en", answering(following))
    assert bot_api.sent_texts(USER) == [
        "The plan: run\n\nFinal answer",
        "Start over?\n\nRound 1 of 3",
    ]
    first, second = (c for c in bot_api.calls_of("sendMessage") if c.status == 200)
    assert "reply_markup" not in first.params and "reply_markup" in second.params
