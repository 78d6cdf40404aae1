"""Private chats end to end: what the user sees and what the model is sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import (
    RunningBot,
    ask_private,
    bot_settings,
    button_kinds,
    conversation,
    final_buttons,
    sent,
    started_bot,
    wait_sent,
)

USER = 501
STRANGER = 502


async def test_three_round_private_consultation(bot: RunningBot) -> None:
    """Two clarifying rounds with a button, then the final answer marked complete."""
    bot.model.enqueue("**Which** exercises?")
    bot.model.enqueue("How long have you trained?")
    bot.model.enqueue("## Plan\n- 3×12 hammer curls")
    await bot.send(USER, "Help me pick weights")
    first = await bot.replies(USER, 1)
    assert first[0].startswith("Which exercises?")
    assert first[0].endswith("Round 1 of 3")
    await bot.send(USER, "Hammer curls")
    await bot.replies(USER, 2)
    await bot.send(USER, "Two months")
    texts = await bot.replies(USER, 3)
    assert "Plan" in texts[2] and "3×12 hammer curls" in texts[2]
    assert "Final answer" in texts[2] and "Consultation complete" in texts[2]
    final_request = bot.model.requests[-1]["messages"]
    assert "round 3 of 3" in final_request[0]["content"]
    assert "\n> Help me pick weights\n" in final_request[0]["content"]
    assert [m["content"] for m in final_request[1:]] == [
        "Help me pick weights",
        "**Which** exercises?",
        "Hammer curls",
        "How long have you trained?",
        "Two months",
    ]
    sends = [c for c in bot.api.calls_of("sendMessage") if str(c.params["chat_id"]) == str(USER)]
    assert button_kinds(sends[0]) == ["qf"] and final_buttons(sends[2])


# -- bad input -------------------------------------------------------------------------------


async def test_whitespace_only_message_is_refused_without_the_model(bot: RunningBot) -> None:
    """A message of only spaces and newlines gets the "empty" reply; the model is not called."""
    [text] = await ask_private(bot, USER, "   \n\t ")
    assert text == "Your message is empty. Please write your question in words."
    assert bot.model.requests == []


async def test_overlong_message_is_cut_and_the_user_told(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A message over MAX_INPUT_CHARS is cut to it; the user is told; the model gets the cut."""
    long_text = "Please help me with this: " + "x" * 100
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, max_input_chars=50
    ) as bot:
        notice, reply = await ask_private(bot, USER, long_text, parts=2)
        assert notice == "Your message was too long, so I used its first 50 characters."
        assert conversation(model_server.requests[0]) == [long_text[:50]]
        assert reply.startswith("Reply to: " + long_text[:50])


@pytest.mark.parametrize("media", [{"sticker": True}, {"photo": True}])
async def test_media_without_text_gets_a_text_only_reply(
    bot: RunningBot, media: dict[str, bool]
) -> None:
    """A sticker or a photo without caption gets a polite "text only" reply, no model call."""
    [text] = await ask_private(bot, USER, None, **media)
    assert text.startswith("I can only read text.")
    assert bot.model.requests == []


async def test_photo_caption_is_the_message(bot: RunningBot) -> None:
    """A photo with a caption is answered as if the caption were the message."""
    [reply] = await ask_private(bot, USER, None, photo=True, caption="Is this plant healthy?")
    assert reply == "Reply to: Is this plant healthy?\n\nRound 1 of 3"
    assert conversation(bot.model.requests[0]) == ["Is this plant healthy?"]


async def test_edited_message_is_ignored(bot: RunningBot) -> None:
    """Editing a message already sent does not call the model or reply.

    The original text is already part of the consultation and may have been answered,
    so re-answering the edit would fork the conversation; the user can send a new
    message instead. Updates of one chat are processed in order, so once the message
    after the edit is answered the edit has been handled.
    """
    original = await bot.send(USER, "Budget is 100")
    await wait_sent(bot, USER, 1)
    bot.api.push_update(
        bot.api.edited_message(USER, original["message_id"], "Budget is 200", user_id=USER)
    )
    [reply] = await ask_private(bot, USER, "Anything else?")
    assert reply.startswith("Reply to: Anything else?")
    assert len(bot.model.requests) == 2
    assert "Budget is 200" not in str(bot.model.requests)
    assert len(sent(bot, USER)) == 2


# -- access ----------------------------------------------------------------------------------


async def test_stranger_is_refused_when_users_are_listed(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """With an allow-list, a user not on it gets "not available"; a listed user is served."""
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, allowed_user_ids=frozenset({USER})
    ) as bot:
        [text] = await ask_private(bot, STRANGER, "Hello")
        assert text == "Sorry, this bot is not available here."
        assert model_server.requests == []
        [reply] = await ask_private(bot, USER, "Hello")
        assert reply.startswith("Reply to: Hello")


async def test_stranger_cannot_use_commands_or_buttons(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """With an allow-list, a stranger's commands and button presses change nothing."""
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, allowed_user_ids=frozenset({USER})
    ) as bot:
        for command in ("/start", "/rounds 2", "/role lawyer"):
            [text] = await ask_private(bot, STRANGER, command)
            assert text == "Sorry, this bot is not available here."
        bot.api.push_update(bot.api.callback_query(STRANGER, STRANGER, "rounds:1", 1))
        await bot.api.wait_for("answerCallbackQuery")
        settings = await bot.runtime.engine.settings.of(f"tg:{STRANGER}")
        assert settings.max_rounds is None and settings.role is None
        assert len(sent(bot, STRANGER)) == 3
        assert model_server.requests == []


async def test_per_user_rate_limit_refuses_the_third_message(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """With two messages a minute allowed, the third gets the rate-limit reply; a fourth
    message and a command are dropped without a second one (a button press, counted apart,
    still works)."""
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, user_rate_limit_per_minute=2
    ) as bot:
        await ask_private(bot, USER, "one")
        await ask_private(bot, USER, "two")
        [text] = await ask_private(bot, USER, "three")
        assert text.startswith("You're sending messages too fast. Please wait")
        await bot.send(USER, "four")  # still too fast: ignored without a second warning
        await bot.send(USER, "/rounds 5")
        bot.api.push_update(bot.api.callback_query(USER, USER, "rounds:2", 1))
        texts = await bot.replies(USER, count=4)
        assert texts[3].startswith("Rounds per consultation: 2.")
        assert len(texts) == 4
        warnings = [t for t in bot.messages(USER) if t.startswith("You're sending messages")]
        assert len(warnings) == 1
        assert len(model_server.requests) == 2


async def test_replies_are_counted_in_the_metrics(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A Telegram round shows up in /metrics: rounds, model calls and tokens."""
    from app.runtime import open_runtime
    from bot.app import build_application

    settings = bot_settings(tmp_path / "m.sqlite3", bot_api, model_server)
    async with open_runtime(settings) as runtime:
        application = build_application(
            settings.bot_config(),
            runtime.engine,
            on_reply=lambda reply: runtime.metrics.record_reply(reply, source="telegram"),
        )
        async with application:
            await application.start()
            assert application.updater is not None
            await application.updater.start_polling(poll_interval=0, timeout=1)
            running = RunningBot(application, runtime, bot_api, model_server)
            await running.send(USER, "Question")
            await running.replies(USER, 1)
            await application.updater.stop()
            await application.stop()
        text = runtime.metrics.render()[0].decode()
    assert 'rounds_answered_total{bot="0",final="false",source="telegram"} 1.0' in text
    assert "consult_model_first_token_seconds_count 1.0" in text
