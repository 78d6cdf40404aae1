"""A reply the model did not finish says so under it, whatever the round."""

from __future__ import annotations

from pathlib import Path

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import ask_private, started_bot

USER = 4242


async def test_a_question_round_cut_off_says_it_may_be_incomplete(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A clarifying reply whose stream stopped early is shown with the incomplete note."""
    model_server.enqueue("What is your budget and how often do you", stop_early=True)
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        [reply] = await ask_private(bot, USER, "Help me choose a laptop")
    assert reply.startswith("What is your budget and how often do you")
    assert "Round 1 of 3" in reply
    assert "may be incomplete: it was cut off" in reply
    assert len(model_server.requests) == 1  # a question round is never continued


async def test_a_whole_question_round_has_no_note(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A clarifying reply that ended normally carries only the round line."""
    model_server.enqueue("What is your budget?")
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        [reply] = await ask_private(bot, USER, "Help me choose a laptop")
    assert "Round 1 of 3" in reply
    assert "incomplete" not in reply


async def test_the_note_speaks_the_users_language(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A Russian-speaking user reads the note in Russian."""
    model_server.enqueue("Какой у вас бюджет и как часто вы", stop_early=True)
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        [reply] = await ask_private(bot, USER, "Помоги выбрать ноутбук", language_code="ru")
    assert "Ответ может быть неполным: он оборвался" in reply


async def test_a_reply_cut_for_looping_is_delivered_once_with_its_first_occurrence(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A model repeating a 200+ character passage: the progress display is replaced by one
    finished message holding the kept text once (the passage once), with the note."""
    passage = (
        "Check the hinge first: a loose hinge wobbles when you type, and the screen drifts "
        "backwards on a train. Then the keyboard: press each key near the edges, listen for "
        "rattles, and make sure the backlight covers every row evenly. "
    )
    model_server.enqueue("Here is my checklist. " + passage * 12, chunk_size=40)
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        [reply] = await ask_private(bot, USER, "How to test a laptop?")
    assert reply.count("Here is my checklist.") == 1
    assert reply.count("Check the hinge first") == 1
    assert "may be incomplete: it was cut off" in reply
