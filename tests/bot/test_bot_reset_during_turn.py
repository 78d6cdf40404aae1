"""/status and /reset while the model is still answering, end to end through the real PTB
Application, the fake Bot API and a fake model that never finishes: both answer at once,
/reset stops the running turn, and what the user sends next starts afresh, in order.
"/answer", its button and the settings commands still wait for the running turn."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fakes.bot_api import Call, FakeBotApi
from fakes.model_server import FakeModelServer
from tests import bot_harness as harness
from tests.bot_harness import RunningBot

USER = 971


def typing_in(chat_id: int) -> Callable[[Call], bool]:
    def match(call: Call) -> bool:
        return call.method == "sendChatAction" and str(call.params.get("chat_id")) == str(chat_id)

    return match


async def start_stuck_turn(bot: RunningBot, text: str) -> None:
    """Send `text` to a model that only sends keep-alives; return once the bot is typing."""
    bot.model.enqueue(keepalive_only=0.05)
    typing = len([c for c in bot.api.calls if typing_in(USER)(c)])
    await bot.send(USER, text)
    await bot.api.wait_for(typing_in(USER), count=typing + 1)


async def test_status_and_reset_answer_during_a_stuck_turn(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """/status answers at once, /reset stops the turn, the next messages start a new one."""
    async with harness.started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        await start_stuck_turn(bot, "First topic")

        [status] = await harness.ask_private(bot, USER, "/status")
        assert "Consultation in progress: 0 of 3 rounds answered" in status
        assert "I'm writing the answer to your last message now." in status

        [reset] = await harness.ask_private(bot, USER, "/reset")
        assert reset == "Consultation ended. Your next message starts a new one."

        [first] = await harness.ask_private(bot, USER, "Second topic")
        assert first == "Reply to: Second topic\n\nRound 1 of 3"
        assert harness.conversation(bot.model.requests[-1]) == ["Second topic"]
        await bot.send(USER, "More detail")
        texts = await harness.wait_sent(bot, USER, 4)
        assert texts[-1] == "Reply to: More detail\n\nRound 2 of 3"
        assert harness.conversation(bot.model.requests[-1]) == [
            "Second topic",
            "Reply to: Second topic",
            "More detail",
        ]
        # The stopped turn said nothing: no error, no partial reply.
        assert texts[:2] == [status, reset]
        assert not any("not answering" in text for text in texts)


async def test_reset_in_russian_answers_during_a_stuck_turn(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The same in Russian, and /status after the reset shows nothing running."""
    async with harness.started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        await start_stuck_turn(bot, "Первая тема")
        [reset] = await harness.ask_private(bot, USER, "/reset", language_code="ru")
        assert reset == "Консультация завершена. Следующее сообщение начнёт новую."
        [status] = await harness.ask_private(bot, USER, "/status", language_code="ru")
        assert status.startswith("Активной консультации нет.")


async def test_answer_button_and_settings_wait_for_the_running_turn(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Pressed while round 2 is being written, the button gives the final answer after it."""
    async with harness.started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        [question] = await harness.ask_private(bot, USER, "Help me pick a bike")
        assert question.endswith("Round 1 of 3")
        with_button = harness.sent(bot, USER)[-1]
        [button] = harness.buttons(with_button)
        assert button.startswith("qf:")

        bot.model.enqueue("What is your budget?", delay=1.0)
        bot.model.enqueue("## Take the city bike")
        typing = len([c for c in bot.api.calls if typing_in(USER)(c)])
        await bot.send(USER, "For commuting")
        await bot.api.wait_for(typing_in(USER), count=typing + 1)
        message_id = with_button.result["message_id"]
        bot.api.push_update(bot.api.callback_query(USER, USER, "answer", message_id))
        await bot.send(USER, "/rounds 5")

        texts = await harness.wait_sent(bot, USER, 4)
        assert texts[1] == "What is your budget?\n\nRound 2 of 3"
        assert "Take the city bike" in texts[2] and "Final answer" in texts[2]
        assert texts[3] == "Rounds per consultation: 5."


async def test_group_reset_during_a_turn_is_for_admins_and_the_starter(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """In a group a member's /reset is refused at once and the reply goes on being written;
    the starter's /reset stops it, and the next mention starts a new consultation."""
    async with harness.started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        key = f"tg:{harness.GROUP}"
        model_server.enqueue("abc", endless=True, chunk_size=4, chunk_delay=0.01)
        await harness.post_in_group(bot, "@consult_bot plan a trip")
        await harness.group_said(bot, "abc")  # the progress message: the reply is being written

        await harness.post_in_group(bot, "/reset", user=harness.BOB, name="Bob")
        await harness.group_said(bot, harness.NOT_ADMIN)
        assert (await bot.runtime.engine.turns.status(key)).answering

        await harness.post_in_group(bot, "/reset@consult_bot", user=harness.ALICE)
        await harness.group_said(bot, "Consultation ended")
        await harness.post_in_group(bot, "@consult_bot new topic", user=harness.BOB, name="Bob")
        finished = await harness.group_answer(bot, 1)
        assert finished.params["text"].endswith("Round 1 of 3")
        assert harness.conversation(model_server.requests[-1]) == ["Bob: new topic"]
