"""The undelivered replies contract (`bot.transport.undelivered.UndeliveredReplies`): what every
implementation does, run over each one in `tests.port_contract.BACKENDS` — in memory, and
as JSON documents on PostgreSQL. A reply kept for a conversation comes back equal, once,
to one taker, for a day; a later one replaces it. What only PostgreSQL has (another
worker takes it, the cleanup of old rows) is in tests/storage/test_pg_shared.py and
tests/bot/test_bot_delivery.py."""

from __future__ import annotations

import asyncio

from core.domain.consultation import Usage
from core.domain.knowledge_sources import KnowledgeSource
from core.domain.outcomes import Notice, Reply
from core.domain.tools import ToolFailure, ToolUse
from tests.port_contract import BACKENDS, Backend, Clock, port_fixture

port = port_fixture(BACKENDS)
"""The implementation under test."""

DAY = 24 * 3600.0


def reply(text: str = "Answer [1]") -> Reply:
    return Reply(
        text=text,
        consultation_id="c1",
        round=2,
        max_rounds=3,
        is_final=True,
        is_complete=True,
        model="m",
        usage=Usage(10, 20, True),
        notices=frozenset({Notice.PREVIOUS_EXPIRED, Notice.ANSWER_INCOMPLETE}),
        extras={"citations": ["https://example.org/a"]},
        json_valid=True,
        schema_valid=False,
        knowledge_sources=(KnowledgeSource("K2", 7, "Warranty", "Kettles", 3, "Two years."),),
        tool_uses=(
            ToolUse("time__now", "time", "now", '{"tz": "UTC"}', "03:00", ms=4),
            ToolUse(
                "docs__get", "docs", "get", "{}", error="gone", failure=ToolFailure.UNAVAILABLE
            ),
        ),
    )


async def test_a_kept_reply_comes_back_equal_once(port: Backend) -> None:
    """Everything delivery shows comes back: text, round, notices, usage, sources (the
    provider's and the knowledge base's), the tools it used; and the language; a second
    look finds nothing."""
    undelivered = port.undelivered(Clock())
    kept = reply()
    await undelivered.put(5, None, kept, "ru")
    found = await undelivered.pop(5, None)
    assert found is not None
    again, language = found
    assert again == kept and language == "ru"
    assert again.sources == kept.sources and again.sources
    assert again.knowledge_sources == kept.knowledge_sources
    assert again.tool_uses == kept.tool_uses and again.tool_uses
    assert await undelivered.pop(5, None) is None


async def test_a_later_reply_replaces_the_earlier_one(port: Backend) -> None:
    undelivered = port.undelivered(Clock())
    await undelivered.put(5, None, reply("one"), "en")
    await undelivered.put(5, None, reply("two"), "ru")
    assert await undelivered.pop(5, None) == (reply("two"), "ru")
    assert await undelivered.pop(5, None) is None


async def test_chats_and_topics_are_kept_apart(port: Backend) -> None:
    undelivered = port.undelivered(Clock())
    await undelivered.put(5, None, reply("chat"), "en")
    await undelivered.put(5, 9, reply("topic"), "en")
    await undelivered.put(6, None, reply("other"), "en")
    assert await undelivered.pop(5, 9) == (reply("topic"), "en")
    assert await undelivered.pop(5, 8) is None
    assert await undelivered.pop(6, None) == (reply("other"), "en")
    assert await undelivered.pop(5, None) == (reply("chat"), "en")


async def test_a_reply_is_kept_for_a_day_from_its_last_put(port: Backend) -> None:
    clock = Clock()
    undelivered = port.undelivered(clock)
    await undelivered.put(1, None, reply(), "en")
    await undelivered.put(2, None, reply(), "en")
    clock.now += DAY - 1
    await undelivered.put(2, None, reply("again"), "en")
    assert await undelivered.pop(1, None) == (reply(), "en")
    await undelivered.put(1, None, reply(), "en")
    clock.now += DAY - 1
    assert await undelivered.pop(2, None) == (reply("again"), "en")
    clock.now += 1
    assert await undelivered.pop(1, None) is None


async def test_looks_at_once_each_take_their_own_conversation_once(port: Backend) -> None:
    """Many turns look at the same moment: each gets its own conversation's reply, a
    conversation asked twice at once gives it to one look only, the others get None."""
    undelivered = port.undelivered(Clock())
    for chat in range(0, 20, 2):
        await undelivered.put(chat, None, reply(f"chat {chat}"), "en")
    await undelivered.put(4, 7, reply("topic 7"), "ru")
    asked = [(chat, None) for chat in range(20)] + [(4, 7), (4, None)]
    results = await asyncio.gather(*(undelivered.pop(chat, topic) for chat, topic in asked))
    for (chat, _), result in zip(asked[:20], results[:20], strict=True):
        assert result == ((reply(f"chat {chat}"), "en") if chat % 2 == 0 else None)
    assert results[20] == (reply("topic 7"), "ru")
    assert results[21] is None  # (4, None) was asked twice: taken by the first look only
    assert [await undelivered.pop(chat, topic) for chat, topic in asked] == [None] * 22


async def test_forgetting_a_chat_drops_its_replies_in_every_topic_and_no_others(
    port: Backend,
) -> None:
    undelivered = port.undelivered(Clock())
    for chat, thread in ((5, None), (5, 11), (6, None), (-5, None)):
        await undelivered.put(chat, thread, reply(f"{chat}/{thread}"), "en")
    assert await undelivered.forget_chat(5) == 2
    assert await undelivered.forget_chat(5) == 0
    assert await undelivered.pop(5, None) is None and await undelivered.pop(5, 11) is None
    assert await undelivered.pop(6, None) == (reply("6/None"), "en")
    assert await undelivered.pop(-5, None) == (reply("-5/None"), "en")
