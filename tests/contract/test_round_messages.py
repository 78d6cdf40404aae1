"""What both stores keep of a round's replies besides their text: whether a final answer
came because the model said it knew enough (`Message.ready_for_final`, on every read and
every way of writing), and which Telegram message carries each conversation's round
keyboard (`swap_round_keyboard`, `forget_round_keyboards`)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from core.domain.consultation import Message, Role, Status
from tests.store_contract import Rows, make

if TYPE_CHECKING:
    from app.stores import Store


async def test_a_final_answer_the_model_was_ready_for_says_so_on_every_read(
    store: Store,
) -> None:
    """record_reply keeps `ready_for_final`; get, load_latest and load_turn read it back;
    messages written without it (the request, a follow-up's answer) read False."""
    consultation = make(messages=[Message(Role.USER, "first", 1.0, turn_id="tg:1")])
    await store.create(consultation)
    final = Message(Role.ASSISTANT, "The answer", 2.0, ready_for_final=True)
    await store.record_reply(
        consultation.id,
        final,
        expected_round=0,
        current_round=1,
        status=Status.COMPLETE,
        last_activity_at=2.0,
    )
    follow_up = Message(Role.ASSISTANT, "More", 4.0)
    await store.add_message(consultation.id, Message(Role.USER, "And?", 3.0), last_activity_at=3.0)
    await store.record_follow_up(
        consultation.id, follow_up, expected_follow_ups=0, last_activity_at=4.0
    )

    expected = [False, True, False, False]
    for loaded in (await store.get(consultation.id), await store.load_latest("chat:1")):
        assert loaded is not None
        assert [m.ready_for_final for m in loaded.messages] == expected
    found, _ = await store.load_turn("chat:1", "tg:1")
    assert found is not None and found.reply == final


async def test_replies_written_together_each_keep_their_own_ready_flag(store: Store) -> None:
    """Many chats answered at once (shared statements on PostgreSQL), and a consultation
    created with its messages: each message keeps its own flag."""
    chats = [make(f"tg:ready:{n}", at=float(n)) for n in range(8)]
    for consultation in chats:
        await store.create(consultation)
    await asyncio.gather(
        *(
            store.record_reply(
                c.id,
                Message(Role.ASSISTANT, f"answer {n}", 50.0, ready_for_final=n % 2 == 0),
                expected_round=0,
                current_round=1,
                status=Status.COMPLETE,
                last_activity_at=50.0,
            )
            for n, c in enumerate(chats)
        )
    )
    for n, c in enumerate(chats):
        loaded = await store.get(c.id)
        assert loaded is not None and loaded.messages[-1].ready_for_final is (n % 2 == 0)

    created = make(
        "tg:ready:created",
        messages=[
            Message(Role.USER, "q", 1.0),
            Message(Role.ASSISTANT, "a", 2.0, ready_for_final=True),
        ],
        current_round=1,
        status=Status.COMPLETE,
    )
    await store.create(created)
    assert await store.get(created.id) == created


async def test_a_conversation_keeps_one_keyboard_message_swapped_per_reply(
    store: Store, rows: Rows
) -> None:
    """Each swap answers the message named before (None at first) and keeps the new one;
    None forgets it; a forum topic and another chat are conversations of their own."""
    assert await store.swap_round_keyboard(7, None, 10) is None
    assert await store.swap_round_keyboard(7, None, 11) == 10
    assert await store.swap_round_keyboard(7, 3, 20) is None  # a topic of the same chat
    assert await store.swap_round_keyboard(8, None, 30) is None
    assert await store.swap_round_keyboard(7, None, None) == 11
    assert await store.swap_round_keyboard(7, None, None) is None
    assert await store.swap_round_keyboard(7, 3, 21) == 20
    assert await rows("round_keyboards") == 2


async def test_forgetting_a_chats_keyboards_leaves_other_chats_theirs(
    store: Store, rows: Rows
) -> None:
    """Every conversation of the chat goes (each topic); another chat keeps its own."""
    await store.swap_round_keyboard(7, None, 10)
    await store.swap_round_keyboard(7, 3, 20)
    await store.swap_round_keyboard(8, None, 30)
    assert await store.forget_round_keyboards(7) == 2
    assert await store.forget_round_keyboards(7) == 0
    assert await store.swap_round_keyboard(7, None, 12) is None
    assert await store.swap_round_keyboard(8, None, 31) == 30
    assert await rows("round_keyboards") == 2


async def test_swaps_made_at_once_each_take_away_a_different_message(store: Store) -> None:
    """Twenty replies of one conversation swapping at once (on PostgreSQL, on as many
    connections as the pool gives): every message but the last one kept is answered as
    taken away exactly once, none twice and none lost."""
    await store.swap_round_keyboard(7, None, 1)
    ids = range(2, 22)
    taken = await asyncio.gather(*(store.swap_round_keyboard(7, None, n) for n in ids))
    kept = await store.swap_round_keyboard(7, None, None)
    assert kept is not None
    assert sorted([*(t for t in taken if t is not None), kept]) == [1, *ids]
