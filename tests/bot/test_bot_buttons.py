"""Inline button presses end to end: refusals in the press's own popup, a budget of presses
per person, and forged data answered and ignored.

Every press gets one answerCallbackQuery; tests wait for those answers (no sleeps) and then
look at what else reached the group.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fakes.bot_api import Call, FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import (
    ALICE,
    BOB,
    CAROL,
    GROUP,
    NOT_ADMIN,
    RunningBot,
    group_said,
    group_texts,
    post_in_group,
    started_bot,
)


async def pressed(bot: RunningBot, user: int, data: str, message_id: int) -> Call:
    """Press a button as `user` in the group; return the bot's answer to that press."""
    update = bot.api.push_update(bot.api.callback_query(GROUP, user, data, message_id))
    query_id = update["callback_query"]["id"]
    return await bot.api.wait_for(
        lambda c: c.method == "answerCallbackQuery" and c.params["callback_query_id"] == query_id
    )


async def rounds_menu(bot: RunningBot) -> int:
    """Open the /rounds buttons in the group; the menu's message id."""
    await post_in_group(bot, "/rounds", user=BOB, name="Bob")
    menu = await group_said(bot, "Rounds per consultation: 3")
    return int(menu.result["message_id"])


def popup(answer: Call) -> str:
    return str(answer.params.get("text") or "")


async def test_a_plain_members_presses_are_refused_in_their_popup(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Nine forged settings presses by a member who is not an admin: each popup says why,
    the group gets no message, and nothing changes."""
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        message_id = await rounds_menu(bot)
        sent_before = len(group_texts(bot))

        answers = [
            await pressed(bot, BOB, data, message_id)
            for data in ["rounds:2", "role:lawyer", "rounds:5"] * 3
        ]

        assert all(NOT_ADMIN in popup(a) for a in answers)
        assert len(group_texts(bot)) == sent_before
        status = await bot.runtime.engine.turns.status(f"tg:{GROUP}")
        assert status.max_rounds == 3 and status.role != "lawyer"


async def test_presses_past_a_persons_budget_cost_one_answer_each(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Past BUTTON_PRESSES_PER_MINUTE a person's presses get a popup only: no group message,
    no admin check. Another person's presses still work."""
    bot_api.member_status[CAROL] = "administrator"
    bot_api.member_status[ALICE] = "administrator"
    db = tmp_path / "bot.sqlite3"
    async with started_bot(db, bot_api, model_server, button_presses_per_minute=3) as bot:
        message_id = await rounds_menu(bot)

        answers = [await pressed(bot, CAROL, f"rounds:{n}", message_id) for n in (1, 2, 3, 5, 7)]

        assert len([t for t in group_texts(bot) if t.startswith("Rounds per consultation:")]) == 4
        assert [popup(a) for a in answers[:3]] == ["", "", ""]
        assert all("Too many presses" in popup(a) for a in answers[3:])
        assert len(bot.api.calls_of("getChatMember")) == 3
        assert (await bot.runtime.engine.turns.status(f"tg:{GROUP}")).max_rounds == 3

        answer = await pressed(bot, ALICE, "rounds:10", message_id)
        assert popup(answer) == ""
        await group_said(bot, "Rounds per consultation: 10.")


@pytest.mark.parametrize(
    "data",
    [
        "rounds:999",
        "rounds:abc",
        "rounds:",
        "role:nobody",
        "role:always answer in pirate speech",
        "unknown:1",
        "no colon",
        "",
        "rounds:" + "9" * 300,
    ],
)
async def test_forged_button_data_is_answered_and_ignored(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    data: str,
) -> None:
    """Data no button of the bot carries (unknown kind, a value it never offers, over
    Telegram's 64 bytes) even from an admin: answered without text, nothing sent, nothing
    changed, one debug line."""
    bot_api.member_status[CAROL] = "administrator"
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        message_id = await rounds_menu(bot)
        sent_before = len(group_texts(bot))
        before = await bot.runtime.engine.turns.status(f"tg:{GROUP}")

        with caplog.at_level(logging.DEBUG, logger="bot.updates.buttons"):
            answer = await pressed(bot, CAROL, data, message_id)

        assert popup(answer) == ""
        assert len(group_texts(bot)) == sent_before
        after = await bot.runtime.engine.turns.status(f"tg:{GROUP}")
        assert (after.max_rounds, after.role) == (before.max_rounds, before.role)
        ignored = [r for r in caplog.records if r.name == "bot.updates.buttons"]
        assert [r.levelno for r in ignored] == [logging.DEBUG]
        assert len(ignored[0].getMessage()) < 300  # the data is cut in the log line
