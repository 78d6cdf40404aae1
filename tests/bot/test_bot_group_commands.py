"""Commands in groups end to end: who may configure the consultation, commands meant for
other bots, and /help's privacy-mode note.

A command that must be ignored is followed by one that is answered: updates of one chat are
handled in order, so the ignored one was handled by then (no sleeps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import (
    ALICE,
    BOB,
    CAROL,
    GROUP,
    NOT_ADMIN,
    RunningBot,
    bot_settings,
    group_answer,
    group_said,
    group_texts,
    post_in_group,
    running_bot,
)


async def test_configuration_commands_need_admin_or_starter(bot: RunningBot) -> None:
    """A plain member is refused /rounds and /reset (told once a minute); an admin and the
    starter are not."""
    bot.api.member_status[CAROL] = "administrator"
    service = bot.runtime.engine
    await post_in_group(bot, "@consult_bot plan a trip")
    await group_answer(bot, 1)

    await post_in_group(bot, "/rounds 2", user=BOB, name="Bob")
    await group_said(bot, NOT_ADMIN)
    await post_in_group(bot, "/reset", user=BOB, name="Bob")  # refused in silence
    await bot.api.wait_for("getChatMember", count=2)  # /reset runs out of order
    status = await service.turns.status(f"tg:{GROUP}")
    assert status.active and status.max_rounds == 3

    await post_in_group(bot, "/rounds 2", user=CAROL, name="Carol")
    await group_said(bot, "Rounds per consultation: 2.")
    await post_in_group(bot, "/rounds 4", user=ALICE)
    await group_said(bot, "Rounds per consultation: 4.")
    assert (await service.turns.status(f"tg:{GROUP}")).max_rounds == 4
    await post_in_group(bot, "/reset", user=ALICE)
    await group_said(bot, "Consultation ended")
    assert not (await service.turns.status(f"tg:{GROUP}")).active

    await post_in_group(bot, "@consult_bot another question", user=BOB, name="Bob")
    await group_answer(bot, 2)
    await post_in_group(bot, "/reset", user=CAROL, name="Carol")
    await group_said(bot, "Consultation ended", count=2)
    assert len([t for t in group_texts(bot) if NOT_ADMIN in t]) == 1
    assert len([t for t in group_texts(bot) if "Consultation ended" in t]) == 2


async def test_anyone_may_configure_when_the_operator_allows(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """With GROUP_CONFIG_ADMINS_ONLY=false any member may change rounds and reset."""
    settings = bot_settings(
        tmp_path / "bot.sqlite3", bot_api, model_server, group_config_admins_only=False
    )
    async with running_bot(settings, bot_api, model_server) as bot:
        await post_in_group(bot, "@consult_bot plan a trip")
        await group_answer(bot, 1)
        await post_in_group(bot, "/rounds 2", user=BOB, name="Bob")
        await group_said(bot, "Rounds per consultation: 2.")
        await post_in_group(bot, "/reset", user=BOB, name="Bob")
        await group_said(bot, "Consultation ended")
        assert not any(NOT_ADMIN in t for t in group_texts(bot))
        assert bot.api.calls_of("getChatMember") == []


async def test_commands_addressed_to_other_bots_are_ignored(bot: RunningBot) -> None:
    """/cmd@consult_bot works, /cmd@other_bot is someone else's, /unknown@consult_bot hints."""
    bot.api.member_status[ALICE] = "administrator"
    await post_in_group(bot, "/rounds@other_bot 5")
    await post_in_group(bot, "/foo@other_bot")
    await post_in_group(bot, "/foo")
    await post_in_group(bot, "/rounds@consult_bot 2")
    await group_said(bot, "Rounds per consultation: 2.")
    await post_in_group(bot, "/foo@consult_bot")
    await group_said(bot, "I don't know that command")
    assert len(group_texts(bot)) == 2
    assert (await bot.runtime.engine.turns.status(f"tg:{GROUP}")).max_rounds == 2


@pytest.mark.parametrize("reads_all", [False, True])
async def test_help_explains_privacy_mode_only_when_it_applies(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    reads_all: bool,
) -> None:
    """/help in a group explains privacy mode when the bot cannot read every message."""
    bot_api.can_read_all_group_messages = reads_all
    settings = bot_settings(tmp_path / "bot.sqlite3", bot_api, model_server)
    async with running_bot(settings, bot_api, model_server) as bot:
        await post_in_group(bot, "/help")
        group_help = (await group_said(bot, "/rounds")).params["text"]
        await bot.send(77, "/help")
        private_help = (await group_said(bot, "/rounds", chat=77)).params["text"]
    assert ("Privacy mode" in group_help) is not reads_all
    assert "Privacy mode" not in private_help


async def test_settings_buttons_follow_the_same_permission_rule(bot: RunningBot) -> None:
    """Anyone may open the /rounds buttons; a plain member's press is refused (in its popup),
    an admin's works."""
    bot.api.member_status[CAROL] = "administrator"
    await post_in_group(bot, "/rounds", user=BOB, name="Bob")
    menu = await group_said(bot, "Rounds per consultation: 3")
    assert menu.params["reply_markup"]["inline_keyboard"]
    message_id = menu.result["message_id"]
    bot.api.push_update(bot.api.callback_query(GROUP, BOB, "rounds:2", message_id))
    refused = await bot.api.wait_for("answerCallbackQuery")
    assert NOT_ADMIN in refused.params["text"]
    bot.api.push_update(bot.api.callback_query(GROUP, CAROL, "rounds:2", message_id))
    await group_said(bot, "Rounds per consultation: 2.")
    assert (await bot.runtime.engine.turns.status(f"tg:{GROUP}")).max_rounds == 2
    assert not any(NOT_ADMIN in text for text in group_texts(bot))


async def test_an_anonymous_admin_may_configure(bot: RunningBot) -> None:
    """A command sent on behalf of the group itself (an anonymous admin) is allowed."""
    update = bot.api.text_message(GROUP, "/rounds 5", user_id=1087968824, chat_type="supergroup")
    message = update["message"]
    message["from"] = {
        "id": 1087968824,
        "is_bot": True,
        "first_name": "Group",
        "username": "GroupAnonymousBot",
    }
    message["sender_chat"] = message["chat"]
    bot.api.push_update(update)
    await group_said(bot, "Rounds per consultation: 5.")
    assert bot.api.calls_of("getChatMember") == []


async def test_repeated_refused_commands_cost_the_group_one_message(bot: RunningBot) -> None:
    """Nine `/rounds 2` and a `/role` from a plain member get one refusal between them;
    another member is still told once, and an admin's command still works."""
    bot.api.member_status[CAROL] = "administrator"
    for _ in range(9):
        await post_in_group(bot, "/rounds 2", user=BOB, name="Bob")
    await post_in_group(bot, "/role doctor", user=BOB, name="Bob")
    await post_in_group(bot, "/rounds 2", user=ALICE)
    await post_in_group(bot, "/rounds 2", user=ALICE)
    await post_in_group(bot, "/rounds 5", user=CAROL, name="Carol")
    await group_said(bot, "Rounds per consultation: 5.")
    assert len([t for t in group_texts(bot) if NOT_ADMIN in t]) == 2
    assert len(group_texts(bot)) == 3
    assert (await bot.runtime.engine.turns.status(f"tg:{GROUP}")).max_rounds == 5


async def test_commands_count_against_the_message_limit(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Past USER_RATE_LIMIT_PER_MINUTE a member's commands are dropped after one "too fast"
    notice and cost no admin check; commands for other bots do not count; another member's
    commands are still answered."""
    settings = bot_settings(
        tmp_path / "bot.sqlite3", bot_api, model_server, user_rate_limit_per_minute=3
    )
    async with running_bot(settings, bot_api, model_server) as bot:
        bot.api.member_status[CAROL] = "administrator"
        for _ in range(4):
            await post_in_group(bot, "/foo@other_bot", user=BOB, name="Bob")
        for _ in range(6):
            await post_in_group(bot, "/rounds", user=BOB, name="Bob")
        for _ in range(4):
            await post_in_group(bot, "/rounds 2", user=BOB, name="Bob")
        await post_in_group(bot, "/rounds 5", user=CAROL, name="Carol")
        await group_said(bot, "Rounds per consultation: 5.")
        texts = group_texts(bot)
    assert len([t for t in texts if t.startswith("Rounds per consultation: 3")]) == 3
    assert len([t for t in texts if t.startswith("You're sending messages too fast")]) == 1
    assert not any(NOT_ADMIN in t for t in texts)
    assert len(texts) == 5
    assert [c.params["user_id"] for c in bot_api.calls_of("getChatMember")] == [CAROL]


async def test_status_counts_against_the_limit_in_a_private_chat(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """/status answers at once but still counts: the third of three within a limit of two
    is told to wait."""
    settings = bot_settings(
        tmp_path / "bot.sqlite3", bot_api, model_server, user_rate_limit_per_minute=2
    )
    async with running_bot(settings, bot_api, model_server) as bot:
        for _ in range(3):
            await bot.send(77, "/status")
        texts = await bot.replies(77, count=3)
    assert len([t for t in texts if t.startswith("You're sending messages too fast")]) == 1
    assert len(texts) == 3


async def test_a_private_chat_gets_every_answer(bot: RunningBot) -> None:
    """In a private chat each command is answered (the limit is off in these tests)."""
    for _ in range(9):
        await bot.send(77, "/rounds 2")
    texts = await bot.replies(77, count=9)
    assert texts == ["Rounds per consultation: 2."] * 9
