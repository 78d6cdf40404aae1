"""Client memory in Telegram end to end: the real PTB Application against the fake Bot
API, the real openai SDK against the fake model server, a real SQLite file.

Facts are noted after the final answer is delivered (the notice told once), offered to the
person's next consultation, listed by /memory with a delete button each, deleted one by one
by their owner only, turned off and on per person, and kept apart between private chats
and groups."""

from __future__ import annotations

import pytest

from core.domain.facts import MemoryPreferences
from fakes.bot_api import Call
from tests.bot_harness import (
    ALICE,
    BOB,
    GROUP,
    RunningBot,
    ask_private,
    buttons,
    group_answer,
    group_said,
    post_in_group,
    sent,
    system_prompt,
    wait_sent,
)
from tests.waiting import until

USER = 501
HEADING = "What this person told you in earlier consultations"
NOTICE = "I noted a few lasting facts"


# Memory on and one-round consultations.
pytestmark = pytest.mark.bot_settings(memory_enabled=True, default_max_rounds=1)


async def facts_of(bot: RunningBot, owner: str) -> list[str]:
    state = await bot.runtime.store.load_memory(owner, owner.split("@")[0])
    return [f.text for f in state.facts]


async def wait_facts(bot: RunningBot, owner: str, count: int) -> list[str]:
    """Wait until `owner` has `count` facts (the extraction runs after the answer)."""

    async def stored() -> bool:
        return len(await facts_of(bot, owner)) == count

    await until(stored, f"{owner} holds {count} facts")
    return await facts_of(bot, owner)


async def memory_list(bot: RunningBot, chat: int = USER, user: int = USER) -> Call:
    """Send /memory and return the bot's message."""
    before = len(sent(bot, chat))
    await bot.send(chat, "/memory", user_id=user)
    await wait_sent(bot, chat, before + 1)
    return sent(bot, chat)[-1]


async def press(bot: RunningBot, data: str, message_id: int, user: int = USER) -> Call:
    """Press a button as `user` in the private chat of USER; the bot's answer to the press."""
    update = bot.api.push_update(bot.api.callback_query(USER, user, data, message_id))
    query_id = update["callback_query"]["id"]
    return await bot.api.wait_for(
        lambda c: c.method == "answerCallbackQuery" and c.params["callback_query_id"] == query_id,
        10,
    )


def popup(answer: Call) -> str:
    return str(answer.params.get("text") or "")


async def test_facts_are_noted_after_the_answer_and_offered_next_time(bot: RunningBot) -> None:
    """The answer comes first, then the one-time notice; the next consultation's system
    prompt holds the facts, and no second notice follows."""
    bot.model.enqueue("Plant them in May.")
    bot.model.enqueue("Lives in Riga\nGrows tomatoes")
    texts = await ask_private(bot, USER, "I live in Riga, when do I plant tomatoes?", parts=2)
    assert texts[0].startswith("Plant them in May.")
    assert NOTICE in texts[1]
    assert await wait_facts(bot, "tg:501", 2) == ["Grows tomatoes", "Lives in Riga"]

    bot.model.enqueue("Water twice a week.")
    bot.model.enqueue("Has a greenhouse")
    await ask_private(bot, USER, "How often should I water?")
    assert HEADING in system_prompt(bot.model.requests[2])
    assert "- Grows tomatoes\n- Lives in Riga" in system_prompt(bot.model.requests[2])
    await wait_facts(bot, "tg:501", 3)
    listing = await memory_list(bot)
    assert "1. Has a greenhouse" in listing.params["text"]
    assert sum(NOTICE in c.params["text"] for c in sent(bot, USER)) == 1


async def test_memory_lists_facts_and_deletes_them_one_by_one(bot: RunningBot) -> None:
    """Each fact has a button; a press deletes it and the list is shown again without it."""
    store = bot.runtime.store
    await store.add_facts("tg:501", "tg:501", ["Lives in Riga", "Has a cat"], at=1.0)
    listing = await memory_list(bot)
    text = listing.params["text"]
    assert "1. Has a cat" in text and "2. Lives in Riga" in text
    data = buttons(listing)
    assert len(data) == 2 and all(d.startswith("mf:") for d in data)
    message_id = listing.result["message_id"]  # type: ignore[index]

    assert popup(await press(bot, data[0], message_id)) == "Deleted."
    assert await facts_of(bot, "tg:501") == ["Lives in Riga"]
    edited = await bot.api.wait_for("editMessageText", 10)
    assert "Has a cat" not in edited.params["text"] and "Lives in Riga" in edited.params["text"]

    assert popup(await press(bot, data[1], message_id)) == "Deleted."
    assert popup(await press(bot, data[1], message_id)) == "That fact is no longer there."
    assert await facts_of(bot, "tg:501") == []
    assert "I remember nothing about you" in (await memory_list(bot)).params["text"]


@pytest.mark.parametrize(
    "data",
    [
        "mf:",
        "mf:abc",
        "mf:-1",
        "mf:0",
        "mf:1.5",
        "mf:١٢",  # digits, but not ASCII ones
        "mf:99999999999999999999",
        "mf:" + "9" * 60,
        "mf:1:2",
    ],
)
async def test_forged_delete_data_changes_nothing(bot: RunningBot, data: str) -> None:
    """Malformed or oversized fact ids delete nothing and are answered without text."""
    await bot.runtime.store.add_facts("tg:501", "tg:501", ["Lives in Riga"], at=1.0)
    listing = await memory_list(bot)
    answer = await press(bot, data, listing.result["message_id"])  # type: ignore[index]
    assert popup(answer) == ""
    assert await facts_of(bot, "tg:501") == ["Lives in Riga"]


async def test_another_persons_fact_cannot_be_deleted(bot: RunningBot) -> None:
    """A real fact id of someone else, pressed by this person, deletes nothing."""
    store = bot.runtime.store
    (theirs,) = await store.add_facts("tg:777", "tg:777", ["Secret of another"], at=1.0)
    await store.add_facts("tg:777@tg:-5", "tg:777", ["Group fact of another"], at=1.0)
    listing = await memory_list(bot)
    answer = await press(bot, f"mf:{theirs.id}", listing.result["message_id"])  # type: ignore[index]
    assert popup(answer) == "That fact is no longer there."
    assert await facts_of(bot, "tg:777") == ["Secret of another"]


async def test_memory_off_stops_using_and_noting_facts_until_on(bot: RunningBot) -> None:
    """/memory off: no facts in the prompt, no extraction call; /memory on restores both."""
    await bot.runtime.store.add_facts("tg:501", "tg:501", ["Lives in Riga"], at=1.0)
    assert "Memory is off" in (await ask_private(bot, USER, "/memory off"))[0]
    assert "Memory is off" in (await memory_list(bot)).params["text"]

    bot.model.enqueue("Answer without memory.")
    await ask_private(bot, USER, "I have a dog. What food?")
    assert HEADING not in system_prompt(bot.model.requests[-1])
    assert "Memory is on" in (await ask_private(bot, USER, "/memory on"))[0]
    assert len(bot.model.requests) == 1  # the off consultation made no extraction call
    prefs = (await bot.runtime.store.load_memory("tg:501", "tg:501")).preferences
    assert prefs == MemoryPreferences(enabled=True)

    bot.model.enqueue("Answer with memory.")
    bot.model.enqueue("none")
    await ask_private(bot, USER, "And for a cat?")
    assert "- Lives in Riga" in system_prompt(bot.model.requests[1])


async def test_unknown_memory_arguments_get_the_usage(bot: RunningBot) -> None:
    """/memory with anything but off or on explains itself and changes nothing."""
    reply = await ask_private(bot, USER, "/memory " + "x" * 3000)
    assert reply == ["/memory — what I remember · /memory off · /memory on"]
    prefs = (await bot.runtime.store.load_memory("tg:501", "tg:501")).preferences
    assert prefs == MemoryPreferences()


async def test_group_facts_are_the_members_own_and_stay_in_the_group(bot: RunningBot) -> None:
    """In a group, a member's consultation gets only their facts for that group, and
    /memory there lists only those; their private facts never appear."""
    store = bot.runtime.store
    await store.add_facts(f"tg:{ALICE}", f"tg:{ALICE}", ["Private fact of Alice"], at=1.0)
    await store.add_facts(f"tg:{ALICE}@tg:{GROUP}", f"tg:{ALICE}", ["Alice leads sales"], at=1.0)
    await store.add_facts(f"tg:{BOB}@tg:{GROUP}", f"tg:{BOB}", ["Bob is vegan"], at=1.0)

    bot.model.enqueue("Team plan.")
    bot.model.enqueue("Organises team dinners")
    await post_in_group(bot, "@consult_bot plan our team dinner")
    await group_answer(bot, 1)
    system = system_prompt(bot.model.requests[0])
    assert "Alice leads sales" in system
    assert "Private fact of Alice" not in system and "Bob is vegan" not in system
    await wait_facts(bot, f"tg:{ALICE}@tg:{GROUP}", 2)
    assert await facts_of(bot, f"tg:{ALICE}") == ["Private fact of Alice"]

    await post_in_group(bot, "/memory", user=BOB, name="Bob")
    listing = await group_said(bot, "in this group")
    assert "Bob is vegan" in listing.params["text"]
    assert "Alice" not in listing.params["text"]


async def test_a_failing_extraction_is_logged_never_shown(bot: RunningBot) -> None:
    """The extraction's model error leaves the delivered answer alone and says nothing."""
    bot.model.enqueue("The answer.")
    bot.model.enqueue(status=400, text="bad request")
    texts = await ask_private(bot, USER, "I live in Riga.")
    assert texts[0].startswith("The answer.")
    await bot.model.wait_requests(2)
    listing = await memory_list(bot)
    assert "I remember nothing" in listing.params["text"]
    assert not any(NOTICE in c.params["text"] for c in sent(bot, USER))


async def test_a_follow_ups_answer_is_not_noted_again(bot: RunningBot) -> None:
    """The consultation is noted once, when it completes: a follow-up's answer makes no
    second extraction call."""
    bot.model.enqueue("Plant them in May.")
    bot.model.enqueue("Lives in Riga")
    await ask_private(bot, USER, "I live in Riga, when do I plant tomatoes?", parts=2)
    await wait_facts(bot, "tg:501", 1)
    final = next(c for c in sent(bot, USER) if "Plant them in May." in c.params["text"])
    assert final.result is not None
    requests = len(bot.model.requests)

    bot.model.enqueue("Cover them at night.")
    await bot.send(USER, "And if it frosts?", reply_to_message=int(final.result["message_id"]))
    await bot.api.wait_for(
        lambda c: c.method == "sendMessage" and "Cover them at night." in c.params["text"], 10
    )
    bot.model.enqueue("Plant peas in April.")  # a second consultation, noted in turn
    bot.model.enqueue("Grows peas")
    await ask_private(bot, USER, "When do I plant peas?")
    await wait_facts(bot, "tg:501", 2)
    noting = ["You read a finished consultation" in system_prompt(r) for r in bot.model.requests]
    assert noting[requests:] == [False, False, True]  # the follow-up, the round, its noting
