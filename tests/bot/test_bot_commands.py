"""Commands and their buttons in a private chat, end to end: what the user sees, what the
model is sent (rounds, reset, early finish)."""

from __future__ import annotations

import pytest

from tests.bot_harness import (
    RunningBot,
    ask_private,
    buttons,
    conversation,
    final_buttons,
    press,
    sent,
    system_prompt,
)

USER = 601


async def test_rounds_without_argument_shows_value_and_buttons(bot: RunningBot) -> None:
    """/rounds alone shows the current limit and one button per choice."""
    [text] = await ask_private(bot, USER, "/rounds")
    assert "Rounds per consultation: 3 (1–10)" in text
    assert buttons(sent(bot, USER)[-1]) == [f"rounds:{n}" for n in (1, 2, 3, 5, 7, 10)]
    assert bot.model.requests == []


async def test_rounds_argument_sets_the_next_consultation(bot: RunningBot) -> None:
    """/rounds 5 makes the next consultation five rounds long."""
    [text] = await ask_private(bot, USER, "/rounds 5")
    assert text == "Rounds per consultation: 5."
    [reply] = await ask_private(bot, USER, "Plan my trip")
    assert reply.endswith("Round 1 of 5")
    assert "round 1 of 5" in system_prompt(bot.model.requests[0])


@pytest.mark.parametrize("value", ["0", "-1", "abc", "100000", "2.5"])
async def test_invalid_rounds_are_refused_and_change_nothing(bot: RunningBot, value: str) -> None:
    """An invalid /rounds value gets a clear reply and the limit stays as it was."""
    [text] = await ask_private(bot, USER, f"/rounds {value}")
    assert f"“{value}” is not a valid number of rounds" in text
    assert "1 to 10" in text and "Nothing was changed" in text
    [shown] = await ask_private(bot, USER, "/rounds")
    assert "Rounds per consultation: 3" in shown
    [reply] = await ask_private(bot, USER, "Hello")
    assert reply.endswith("Round 1 of 3")


async def test_rounds_button_sets_the_limit(bot: RunningBot) -> None:
    """Pressing the "2" button under /rounds sets two rounds."""
    await ask_private(bot, USER, "/rounds")
    menu = sent(bot, USER)[-1]
    text = await press(bot, USER, "rounds:2", menu.result["message_id"])
    assert text == "Rounds per consultation: 2."
    await bot.api.wait_for(lambda c: c.method == "answerCallbackQuery")  # once it is set
    [reply] = await ask_private(bot, USER, "Question")
    assert reply.endswith("Round 1 of 2")
    assert "round 1 of 2" in system_prompt(bot.model.requests[-1])


async def test_lowering_rounds_to_rounds_used_makes_the_next_reply_final(
    bot: RunningBot,
) -> None:
    """With two rounds used, /rounds 2 makes the next message get the final answer."""
    await ask_private(bot, USER, "Help me choose a laptop")
    await ask_private(bot, USER, "For video editing")
    [text] = await ask_private(bot, USER, "/rounds 2")
    assert "used 2 of 2" in text and "next message will get the final answer" in text
    [final] = await ask_private(bot, USER, "Budget 1500")
    assert "Final answer" in final and "Consultation complete" in final
    prompt = system_prompt(bot.model.requests[-1])
    assert "last round" in prompt and "round 2 of 2" in prompt
    assert "\n> Help me choose a laptop\n" in prompt
    assert final_buttons(sent(bot, USER)[-1])


async def test_reset_mid_consultation_starts_fresh(bot: RunningBot) -> None:
    """After /reset the next message is round 1 and the model sees only it."""
    await ask_private(bot, USER, "First topic")
    [text] = await ask_private(bot, USER, "/reset")
    assert "Consultation ended" in text
    [reply] = await ask_private(bot, USER, "Second topic")
    assert reply.endswith("Round 1 of 3")
    assert conversation(bot.model.requests[-1]) == ["Second topic"]
    assert "round 1 of 3" in system_prompt(bot.model.requests[-1])


async def test_reset_with_nothing_active_says_so(bot: RunningBot) -> None:
    """/reset with no consultation explains there is none."""
    [text] = await ask_private(bot, USER, "/reset")
    assert text == "There is no active consultation. Send your question to start one."


async def test_start_and_help_in_english(bot: RunningBot) -> None:
    """/start greets and /help lists the commands, in English by default."""
    [start] = await ask_private(bot, USER, "/start")
    assert start.startswith("Hi! I'm a consultant.") and "up to 3 rounds" in start
    [help_text] = await ask_private(bot, USER, "/help")
    for command in ("/rounds", "/answer", "/reset", "/status", "/retry", "/role"):
        assert command in help_text
    assert "1–10, now 3" in help_text
    assert bot.model.requests == []


async def test_start_and_help_in_russian(bot: RunningBot) -> None:
    """A user whose Telegram is in Russian gets /start and /help in Russian."""
    [start] = await ask_private(bot, USER, "/start", language_code="ru")
    assert start.startswith("Здравствуйте! Я консультант.")
    [help_text] = await ask_private(bot, USER, "/help", language_code="ru")
    assert "Как это работает" in help_text and "/rounds" in help_text


async def test_status_before_and_during_a_consultation(bot: RunningBot) -> None:
    """/status says when nothing is active, then shows rounds used and the request."""
    [idle] = await ask_private(bot, USER, "/status")
    assert idle.startswith("No active consultation. Rounds: 3.")
    await ask_private(bot, USER, "Fix my sleep schedule")
    [active] = await ask_private(bot, USER, "/status")
    assert "1 of 3 rounds answered" in active
    assert "“Fix my sleep schedule”" in active


async def test_answer_command_gives_the_final_answer_early(bot: RunningBot) -> None:
    """/answer after round 1 gets the final answer, marked final and complete."""
    await ask_private(bot, USER, "Plan a garden")
    bot.model.enqueue("## Garden plan\nPlant tomatoes.")
    [final] = await ask_private(bot, USER, "/answer")
    assert "Garden plan" in final and "Plant tomatoes." in final
    assert "Final answer" in final and "Consultation complete" in final
    request = bot.model.requests[-1]
    assert "asked for your final answer now" in system_prompt(request)
    assert conversation(request)[-1] == "Please give me your final answer now."
    assert final_buttons(sent(bot, USER)[-1])
    [reply] = await ask_private(bot, USER, "New question")
    assert reply.endswith("Round 1 of 3")


async def test_answer_button_gives_the_final_answer_early(bot: RunningBot) -> None:
    """The button under a clarifying question gets the final answer now."""
    await ask_private(bot, USER, "Plan a garden")
    question = sent(bot, USER)[-1]
    [button] = buttons(question)
    assert button.startswith("qf:") and button.endswith(":1")  # its round's "answer now"
    bot.model.enqueue("Plant tomatoes.")
    final = await press(bot, USER, button, question.result["message_id"])
    assert final.startswith("Plant tomatoes.")
    assert "Final answer" in final and "Consultation complete" in final


async def test_answer_with_nothing_to_answer(bot: RunningBot) -> None:
    """/answer with no consultation explains there is nothing yet; the model is not called."""
    [text] = await ask_private(bot, USER, "/answer")
    assert text == "There is nothing to answer yet: send your question first."
    assert bot.model.requests == []


async def test_retry_with_nothing_to_retry(bot: RunningBot) -> None:
    """/retry with no waiting message says so and does not call the model."""
    [text] = await ask_private(bot, USER, "/retry")
    assert text == "Nothing to retry: no message is waiting for an answer."
    await ask_private(bot, USER, "Question")
    [again] = await ask_private(bot, USER, "/retry")
    assert again.startswith("Nothing to retry")
    assert len(bot.model.requests) == 1


async def test_role_lists_roles_with_buttons(bot: RunningBot) -> None:
    """/role shows the current expert and one button per persona."""
    [text] = await ask_private(bot, USER, "/role")
    assert text.startswith("Expert: ")
    assert "role:lawyer" in buttons(sent(bot, USER)[-1])
    assert "role:expert" in buttons(sent(bot, USER)[-1])


async def test_role_sets_the_persona_of_the_next_consultation(bot: RunningBot) -> None:
    """/role lawyer puts the lawyer persona into the next consultation's system prompt."""
    [text] = await ask_private(bot, USER, "/role lawyer")
    assert text.startswith("Expert set to Lawyer.")
    await ask_private(bot, USER, "My landlord kept my deposit")
    assert "experienced lawyer" in system_prompt(bot.model.requests[-1])


async def test_role_button_sets_the_persona(bot: RunningBot) -> None:
    """Pressing a persona button under /role chooses it."""
    await ask_private(bot, USER, "/role")
    text = await press(bot, USER, "role:lawyer", sent(bot, USER)[-1].result["message_id"])
    assert text.startswith("Expert set to Lawyer.")


async def test_unknown_role_is_refused(bot: RunningBot) -> None:
    """/role nonsense names the roles that exist and changes nothing."""
    [text] = await ask_private(bot, USER, "/role nonsense")
    assert text.startswith("Unknown expert “nonsense”. Available:")
    assert "lawyer" in text
    await ask_private(bot, USER, "Question")
    assert "experienced lawyer" not in system_prompt(bot.model.requests[-1])


async def test_unknown_command_gets_a_hint(bot: RunningBot) -> None:
    """/foo is answered with a pointer to /help, not sent to the model."""
    [text] = await ask_private(bot, USER, "/foo bar")
    assert text == "I don't know that command. See /help."
    assert bot.model.requests == []


async def test_early_finish_marker_completes_the_consultation(bot: RunningBot) -> None:
    """A reply starting with [[FINAL]] is shown without it, as the final answer."""
    bot.model.enqueue("[[FINAL]] Drink more water.\n\n- two litres a day")
    [final] = await ask_private(bot, USER, "How much water should I drink? I'm 30, 70 kg, active.")
    assert "[[FINAL]]" not in final and "FINAL]" not in final
    assert final.startswith("Drink more water.")
    assert "Final answer" in final and "Consultation complete" in final
    assert final_buttons(sent(bot, USER)[-1])
    [reply] = await ask_private(bot, USER, "Another question")
    assert reply.endswith("Round 1 of 3")
    assert conversation(bot.model.requests[-1]) == ["Another question"]
