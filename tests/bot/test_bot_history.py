"""/history and its "Answer N" button, end to end: the real Application, the fake Bot API,
the fake model and a SQLite file (kept across a restart)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from bot.commands.history import SHOW
from bot.transport.keyboards import EXPORT, FOLLOW_UP
from bot.updates.buttons import MAX_DATA_BYTES
from core.domain.consultation import Consultation, Message, Role, Status
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import RunningBot, ask_private, buttons, sent, started_bot, wait_sent
from tests.history_harness import FINAL_MARKDOWN, finish, popup, pressed, wait_uploads

USER = 801
OTHER = 802


# Consultations take two rounds.
pytestmark = pytest.mark.bot_settings(default_max_rounds=2)


def bare(consultation_id: str) -> str:
    return consultation_id.replace("-", "")


async def test_history_lists_the_chats_consultations_newest_first_with_their_buttons(
    bot: RunningBot,
) -> None:
    """One message numbers the chat's consultations newest first, each with its date,
    status, rounds used and the start of its request; a complete one offers "Answer N"
    and "Document N", the others "Document N" only. Other chats' never appear."""
    await finish(bot, USER, "Plan a trip to Rome\nwith kids", "In May")
    await ask_private(bot, USER, "Choose a laptop")
    await ask_private(bot, USER, "/reset")
    await ask_private(bot, USER, "Fix my bike " + "very " * 40 + "slowly")
    await ask_private(bot, OTHER, "Someone else's question")
    history = await bot.runtime.engine.history.recent(f"tg:{USER}")
    requests_before = len(bot.model.requests)

    [text] = await ask_private(bot, USER, "/history")

    today = time.strftime("%Y-%m-%d", time.gmtime())
    lines = text.split("\n\n")
    assert lines[0] == "Your recent consultations, newest first (times in UTC):"
    assert (
        lines[1].startswith(f"1. {today} ")
        and "· in progress · 1 of 2 rounds\n“Fix my bike very" in lines[1]
    )
    assert lines[1].endswith("…”") and len(lines[1].split("\n")[1]) <= 82
    assert "· ended · 1 of 2 rounds\n“Choose a laptop”" in lines[2]
    assert "· complete · 2 of 2 rounds\n“Plan a trip to Rome with kids”" in lines[3]
    assert len(lines) == 4 and "Someone else" not in text
    keyboard = sent(bot, USER)[-1].params["reply_markup"]["inline_keyboard"]
    assert [[b["text"] for b in row] for row in keyboard] == [
        ["Document 1"],
        ["Document 2"],
        ["Answer 3", "Document 3"],
    ]
    ids = [bare(h.id) for h in history]
    assert buttons(sent(bot, USER)[-1]) == [
        f"{EXPORT}:{ids[0]}",
        f"{EXPORT}:{ids[1]}",
        f"{SHOW}:{ids[2]}",
        f"{EXPORT}:{ids[2]}",
    ]
    assert all(len(d.encode()) <= MAX_DATA_BYTES for d in buttons(sent(bot, USER)[-1]))
    assert len(bot.model.requests) == requests_before


async def test_history_in_russian_and_an_empty_history(bot: RunningBot) -> None:
    """A chat without consultations is told so; the list is in the user's language."""
    [empty] = await ask_private(bot, USER, "/history")
    await finish(bot, USER, "Как выбрать базу данных?", "Для бота", language_code="ru")
    [listed] = await ask_private(bot, USER, "/history", language_code="ru")
    assert empty == "You have no consultations yet. Send your question to start one."
    assert listed.startswith("Ваши последние консультации")
    assert "· завершена · 2 из 2 раундов\n«Как выбрать базу данных?»" in listed
    keyboard = sent(bot, USER)[-1].params["reply_markup"]["inline_keyboard"]
    assert [b["text"] for b in keyboard[0]] == ["Ответ 1", "Документ 1"]


async def test_the_answer_button_sends_the_final_answer_again_like_the_original(
    bot: RunningBot,
) -> None:
    """ "Answer N" sends the stored final answer again, rendered as it was first sent (the
    same text, formatting and footer) with the final answer's buttons; the model is not
    called."""
    final_id = await finish(bot, USER, "Choose a database", "For a bot")
    original = sent(bot, USER)[-1].params
    await ask_private(bot, USER, "/history")
    listing = sent(bot, USER)[-1]
    [show] = [d for d in buttons(listing) if d.startswith(f"{SHOW}:")]
    requests_before = len(bot.model.requests)
    count = len(sent(bot, USER))

    answer = await pressed(bot, USER, show, int(listing.result["message_id"]))
    texts = await wait_sent(bot, USER, count + 1)

    again = sent(bot, USER)[-1].params
    assert popup(answer) == ""
    assert texts[-1] == original["text"]
    assert "Final answer" in texts[-1] and "PostgreSQL" in texts[-1]
    assert again["entities"] == original["entities"]
    assert again["reply_markup"] == original["reply_markup"]
    assert buttons(sent(bot, USER)[-1]) == [
        f"{FOLLOW_UP}:{show.partition(':')[2]}",
        f"{EXPORT}:{show.partition(':')[2]}",
    ]
    assert len(bot.model.requests) == requests_before
    assert final_id != int(sent(bot, USER)[-1].result["message_id"])


async def test_answer_and_document_buttons_of_another_chat_or_forged_do_nothing(
    bot: RunningBot,
) -> None:
    """An "Answer N" press naming another chat's consultation gets the "no longer kept"
    popup and sends nothing; forged data is answered without text; an id of an unfinished
    consultation shows nothing."""
    await finish(bot, USER, "Choose a database", "For a bot")
    await ask_private(bot, USER, "/history")
    [show] = [d for d in buttons(sent(bot, USER)[-1]) if d.startswith(f"{SHOW}:")]
    await ask_private(bot, OTHER, "Unfinished question")
    [active] = await bot.runtime.engine.history.recent(f"tg:{OTHER}")
    other_message = int(sent(bot, OTHER)[-1].result["message_id"])
    sent_before = len(sent(bot, USER)) + len(sent(bot, OTHER))

    stolen = await pressed(bot, OTHER, show, other_message)
    unfinished = await pressed(bot, OTHER, f"{SHOW}:{bare(active.id)}", other_message)
    forged = [
        await pressed(bot, OTHER, data, other_message)
        for data in (f"{SHOW}:", f"{SHOW}:{'z' * 32}", f"{SHOW}:{bare(active.id)}:1", SHOW)
    ]

    assert popup(stolen) == popup(unfinished) == "This consultation is no longer kept."
    assert [popup(a) for a in forged] == [""] * 4
    assert len(sent(bot, USER)) + len(sent(bot, OTHER)) == sent_before


async def test_history_and_export_survive_a_restart(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A new Application on the same database file lists the consultations and exports
    them: the history is stored, not kept in memory."""
    db = tmp_path / "bot.sqlite3"
    async with started_bot(db, bot_api, model_server, default_max_rounds=2) as first:
        await finish(first, USER, "Plan a trip to Rome", "In May")
    async with started_bot(db, bot_api, model_server, default_max_rounds=2) as second:
        [text] = await ask_private(second, USER, "/history")
        await ask_private(second, USER, "/export 1", parts=0)
        docx, markdown = await wait_uploads(second, USER, 2)
    assert "1. " in text and "“Plan a trip to Rome”" in text
    assert docx.filename == "Plan a trip to Rome.docx"
    assert "PostgreSQL" in markdown.data.decode()


async def test_history_shows_the_ten_newest_and_purged_ones_are_gone(bot: RunningBot) -> None:
    """Of twelve consultations the ten newest are listed; once retention purges them
    the history is empty and a Document button left from before says it is gone."""
    store = bot.runtime.store
    for n in range(12):
        at = 1_000_000.0 + n
        text = f"Question number {n}"
        await store.create(
            Consultation(
                id=str(uuid.uuid4()),
                chat_key=f"tg:{USER}",
                max_rounds=2,
                initial_request=text,
                created_at=at,
                last_activity_at=at,
                status=Status.COMPLETE,
                current_round=2,
                messages=[
                    Message(Role.USER, text, at),
                    Message(Role.ASSISTANT, FINAL_MARKDOWN, at),
                ],
            )
        )
    [text] = await ask_private(bot, USER, "/history")
    listing = sent(bot, USER)[-1]
    assert "10. " in text and "11. " not in text
    assert "“Question number 11”" in text.split("\n\n")[1]
    assert "Question number 1”" not in text and "Question number 0" not in text

    await bot.runtime.engine.lifecycle.cleanup(retention_seconds=60)  # beside the periodic one
    [empty] = await ask_private(bot, USER, "/history")
    gone = await pressed(bot, USER, buttons(listing)[1], int(listing.result["message_id"]))
    assert empty.startswith("You have no consultations yet.")
    assert popup(gone) == "This consultation is no longer kept."
    assert bot.api.calls_of("sendDocument") == []
