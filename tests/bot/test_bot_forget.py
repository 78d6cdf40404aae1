"""/forget end to end (real Application, fake Bot API, fake model server, real SQLite): the
confirmation, what its button deletes, what the model sees afterwards, and every press a
stranger could forge."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bot.commands.forget import CONFIRM_MINUTES
from core.domain.consultation import Status
from core.domain.facts import MemoryPreferences
from fakes.bot_api import Call, FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import (
    ALICE,
    BOB,
    GROUP,
    RunningBot,
    ask_private,
    post_in_group,
    sent,
    started_bot,
    system_prompt,
    wait_sent,
)

USER = 5301


def keyboard(call: Call) -> list[tuple[str, str]]:
    markup = call.params.get("reply_markup") or {}
    return [(b["text"], b["callback_data"]) for row in markup["inline_keyboard"] for b in row]


async def pressed(bot: RunningBot, chat: int, user: int, data: str, message_id: int) -> str:
    """Press as `user`; the popup the press was answered with ("" for none)."""
    update = bot.api.push_update(bot.api.callback_query(chat, user, data, message_id))
    query_id = update["callback_query"]["id"]
    answer = await bot.api.wait_for(
        lambda c: c.method == "answerCallbackQuery" and c.params["callback_query_id"] == query_id,
        10,
    )
    return str(answer.params.get("text") or "")


async def confirmation(bot: RunningBot, chat: int = USER) -> tuple[dict[str, str], int]:
    """Send /forget; its buttons by label, and the message carrying them."""
    before = len(sent(bot, chat))
    await bot.send(chat, "/forget")
    await wait_sent(bot, chat, before + 1)
    call = sent(bot, chat)[-1]
    assert "cannot be undone" in call.params["text"]
    assert call.result is not None
    return dict(keyboard(call)), int(call.result["message_id"])


async def edits(bot: RunningBot, count: int = 1) -> list[str]:
    """The texts of the first `count` message edits, once that many were made."""
    await bot.api.wait_for("editMessageText", 10, count=count)
    return [str(c.params["text"]) for c in bot.api.calls_of("editMessageText")]


async def consult(bot: RunningBot, model: FakeModelServer, secret: str) -> None:
    model.enqueue("Which budget do you have?")
    model.enqueue("Buy the light one.")
    await ask_private(bot, USER, "/rounds 2")
    await ask_private(bot, USER, f"Help me choose a laptop, my name is {secret}")
    await ask_private(bot, USER, "About 1500")
    model.enqueue("What is it for?")
    await ask_private(bot, USER, "And a phone?")  # an active consultation too


async def test_confirmed_forget_deletes_the_chat_and_the_model_never_sees_it_again(
    bot: RunningBot, model_server: FakeModelServer
) -> None:
    await consult(bot, model_server, "Zebediah")
    store = bot.runtime.store
    assert await store.latest_status(f"tg:{USER}") is Status.ACTIVE
    shown = sent(bot, USER)[-1].result  # the round's message, carrying its keyboard
    assert shown is not None
    kept = shown["message_id"]
    assert await store.swap_round_keyboard(USER, None, kept) == kept  # kept, and put back
    person = f"tg:{USER}"
    await store.add_facts(person, person, ["Is called Zebediah"], at=1.0)
    await store.add_facts(f"{person}@tg:{GROUP}", person, ["Leads the laptop club"], at=1.0)
    await store.save_memory_preferences(person, MemoryPreferences(enabled=False))
    buttons, message_id = await confirmation(bot)
    assert list(buttons) == ["Delete everything", "Cancel"]
    assert await store.latest_status(f"tg:{USER}") is Status.ACTIVE  # asking deletes nothing

    assert await pressed(bot, USER, USER, buttons["Delete everything"], message_id) == "Deleted."
    assert (await edits(bot))[-1].startswith("🗑 Deleted.")
    assert await store.latest_status(f"tg:{USER}") is None
    assert (await store.load_chat_settings(f"tg:{USER}")).max_rounds is None
    # Which message carries the round keyboard went too: nothing is known to take away.
    assert await store.swap_round_keyboard(USER, None, None) is None
    for owner in (person, f"{person}@tg:{GROUP}"):
        state = await store.load_memory(owner, person)
        assert not state.facts and state.preferences == MemoryPreferences()

    model_server.enqueue("What is your budget?")
    await ask_private(bot, USER, "Help me choose a tablet")
    sent_to_model = str(model_server.requests[-1]["messages"])
    assert "Zebediah" not in sent_to_model and "laptop" not in sent_to_model
    assert "Help me choose a tablet" in sent_to_model


async def test_cancel_deletes_nothing(bot: RunningBot, model_server: FakeModelServer) -> None:
    await consult(bot, model_server, "Zebediah")
    buttons, message_id = await confirmation(bot)
    await pressed(bot, USER, USER, buttons["Cancel"], message_id)
    assert (await edits(bot))[-1] == "Nothing was deleted."
    assert await bot.runtime.store.latest_status(f"tg:{USER}") is Status.ACTIVE


async def test_stale_foreign_and_forged_presses_delete_nothing(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    db = tmp_path / "bot.sqlite3"
    async with started_bot(db, bot_api, model_server, button_presses_per_minute=0) as bot:
        await stale_foreign_and_forged(bot, model_server)


async def stale_foreign_and_forged(bot: RunningBot, model_server: FakeModelServer) -> None:
    await consult(bot, model_server, "Zebediah")
    buttons, message_id = await confirmation(bot)
    confirm = buttons["Delete everything"]
    minute = int(time.time() // 60)
    stale = f"fg:{USER}:{minute - CONFIRM_MINUTES - 1}:y"
    future = f"fg:{USER}:{minute + 5}:y"
    assert await pressed(bot, USER, USER, stale, message_id) == (
        "This confirmation has expired. Send /forget again."
    )
    assert await pressed(bot, USER, USER, future, message_id) == (
        "This confirmation has expired. Send /forget again."
    )
    forged = [
        "fg:", "fg:y", f"fg:{USER}", f"fg:{USER}:{minute}", f"fg:{USER}:{minute}:Y",
        f"fg:0{USER}:{minute}:y", f"fg:-{USER}:{minute}:y", f"fg:{USER}:{minute}:y:",
        f"fg:{USER}:{minute}:yes", f"fg:{'9' * 40}:{minute}:y", f"fg:{USER}:{minute}:y\n",
        "fg:" + "1" * 60,
    ]  # fmt: skip
    for data in forged:
        assert await pressed(bot, USER, USER, data, message_id) == "", data
    assert await bot.runtime.store.latest_status(f"tg:{USER}") is Status.ACTIVE
    # Another person's press on this chat's button (a forwarded or copied button).
    assert await pressed(bot, USER, USER + 1, confirm, message_id) == (
        "Only the person who sent /forget can confirm it."
    )
    assert await bot.runtime.store.latest_status(f"tg:{USER}") is Status.ACTIVE


async def test_in_a_group_a_member_forgets_their_memory_and_only_admins_the_groups(
    bot: RunningBot, model_server: FakeModelServer
) -> None:
    await post_in_group(bot, "@consult_bot plan a trip")
    await bot.api.wait_for(lambda c: c.method == "sendMessage", 10)
    store = bot.runtime.store
    before = len(sent(bot, GROUP))
    await post_in_group(bot, "/forget", user=BOB, name="Bob")
    await wait_sent(bot, GROUP, before + 1)
    call = sent(bot, GROUP)[-1]
    said: Any = call.params["text"]
    assert said.startswith("This deletes what I remember about you (in every chat).")
    assert call.result is not None
    bob_buttons = dict(keyboard(call))
    await bot.runtime.store.add_facts(f"tg:{BOB}@tg:{GROUP}", f"tg:{BOB}", ["Has a van"], at=1.0)
    await bot.runtime.store.add_facts(f"tg:{BOB}", f"tg:{BOB}", ["Lives in Oslo"], at=1.0)
    confirm = bob_buttons["Delete everything"]
    assert await pressed(bot, GROUP, BOB, confirm, int(call.result["message_id"])) == "Deleted."
    assert await store.latest_status(f"tg:{GROUP}") is Status.ACTIVE  # a member's: memory only
    for owner in (f"tg:{BOB}@tg:{GROUP}", f"tg:{BOB}"):
        assert not (await store.load_memory(owner, f"tg:{BOB}")).facts

    bot.api.member_status[ALICE] = "administrator"
    before = len(sent(bot, GROUP))
    await post_in_group(bot, "/forget", user=ALICE)
    await wait_sent(bot, GROUP, before + 1)
    call = sent(bot, GROUP)[-1]
    assert call.params["text"].startswith("This deletes everything I keep about this group")
    buttons = dict(keyboard(call))
    assert call.result is not None
    message_id = int(call.result["message_id"])
    assert await pressed(bot, GROUP, BOB, buttons["Delete everything"], message_id) == (
        "Only the person who sent /forget can confirm it."
    )
    assert await store.latest_status(f"tg:{GROUP}") is Status.ACTIVE
    assert await pressed(bot, GROUP, ALICE, buttons["Delete everything"], message_id) == "Deleted."
    assert await store.latest_status(f"tg:{GROUP}") is None


async def test_remembered_facts_reach_the_model_until_forgotten(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    db = tmp_path / "bot.sqlite3"
    async with started_bot(db, bot_api, model_server, memory_enabled=True) as bot:
        person = f"tg:{USER}"
        await bot.runtime.store.add_facts(person, person, ["Is called Zebediah"], at=1.0)
        model_server.enqueue("Which budget?")
        await ask_private(bot, USER, "Help me choose a laptop")
        assert "Is called Zebediah" in system_prompt(model_server.requests[-1])

        buttons, message_id = await confirmation(bot)
        assert await pressed(bot, USER, USER, buttons["Delete everything"], message_id) == (
            "Deleted."
        )
        model_server.enqueue("Which size?")
        await ask_private(bot, USER, "Help me choose a tablet")
        assert "Zebediah" not in str(model_server.requests[-1]["messages"])
