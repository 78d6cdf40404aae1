"""Follow-up questions after the final answer, through the real engine: a real store, the
real openai SDK and the fake model server. What the model is sent (the consultation, then
the follow-up, with no clarifying instruction), what is stored, and every refusal."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

from core.domain.asking import UserMessage
from core.domain.consultation import Role, Status
from core.domain.errors import (
    EmptyMessage,
    FollowUpReason,
    FollowUpUnavailable,
    ModelError,
    TurnAlreadyHandled,
    TurnCancelled,
)
from core.llm.llm import OpenAICompleter
from core.turns.engine import Engine
from core.turns.transcript import render_markdown, transcript_of
from fakes.model_server import FakeModelServer
from tests.service_harness import Clock, MakeEngine, make_service
from tests.store_contract import StoreKind

if TYPE_CHECKING:
    from app.stores import Store

KEY = "tg:1"
GUARD = 20  # seconds; only a broken stop ever gets near it


async def finished(service: Engine, model: FakeModelServer, key: str = KEY) -> str:
    """A consultation of `key` answered in two rounds; its id."""
    await service.settings.set_max_rounds(key, 2)
    model.enqueue("Which database do you use now?")
    model.enqueue("## Plan\nMove to PostgreSQL.")
    await service.turns.ask(UserMessage(key, "How do I scale my app?"))
    final = await service.turns.ask(UserMessage(key, "SQLite, 50 writes a second"))
    assert final.is_complete
    return final.consultation_id


def sent(model: FakeModelServer, index: int = -1) -> list[dict[str, Any]]:
    return list(model.requests[index]["messages"])


async def test_a_follow_up_is_answered_directly_with_the_whole_consultation(
    service: Engine, model: FakeModelServer, store: Store
) -> None:
    """The model gets the request, the round, the final answer and then the follow-up, with
    the follow-up instruction and no round's; the reply is final and counts the follow-up,
    and the consultation stays COMPLETE at its last round."""
    consultation_id = await finished(service, model)
    model.enqueue("Use connection pooling.")
    reply = await service.turns.follow_up(KEY, "What about connections?", turn_id="tg:9")

    messages = sent(model)
    assert [(m["role"], m["content"]) for m in messages[1:]] == [
        ("user", "How do I scale my app?"),
        ("assistant", "Which database do you use now?"),
        ("user", "SQLite, 50 writes a second"),
        ("assistant", "## Plan\nMove to PostgreSQL."),
        ("user", "What about connections?"),
    ]
    system = messages[0]["content"]
    assert "follow-up question" in system and "Do not ask clarifying questions" in system
    assert "clarifying questions that matter most" in system  # the base, not a round's ask
    assert "round 1 of" not in system and "last round of the consultation" not in system
    assert (reply.text, reply.is_final, reply.is_complete) == (
        "Use connection pooling.",
        True,
        True,
    )
    assert (reply.follow_up, reply.follow_ups_left, reply.round) == (1, 4, 2)
    assert reply.consultation_id == consultation_id

    stored = await store.get(consultation_id)
    assert stored is not None
    assert (stored.status, stored.current_round, stored.follow_ups) == (Status.COMPLETE, 2, 1)
    assert [(m.role, m.text, m.turn_id) for m in stored.messages[-2:]] == [
        (Role.USER, "What about connections?", "tg:9"),
        (Role.ASSISTANT, "Use connection pooling.", None),
    ]


async def test_later_follow_ups_see_the_earlier_ones_and_the_transcript_lists_them(
    service: Engine, model: FakeModelServer, store: Store
) -> None:
    """A second follow-up is sent after the first one and its answer; the transcript gives
    both after the final answer."""
    consultation_id = await finished(service, model)
    model.enqueue("Pool them.")
    model.enqueue("Yes, with replicas.")
    await service.turns.follow_up(KEY, "Connections?")
    second = await service.turns.follow_up(KEY, "Reads too?", consultation_id=consultation_id)
    assert [m["content"] for m in sent(model)[-3:]] == ["Connections?", "Pool them.", "Reads too?"]
    assert (second.follow_up, second.follow_ups_left) == (2, 3)

    stored = await store.get(consultation_id)
    assert stored is not None
    transcript = transcript_of(stored)
    assert transcript.final_answer == "## Plan\nMove to PostgreSQL."
    assert len(transcript.rounds) == 1
    assert [(p.question, p.answer) for p in transcript.follow_ups] == [
        ("Connections?", "Pool them."),
        ("Reads too?", "Yes, with replicas."),
    ]
    markdown = render_markdown(transcript)
    assert markdown.index("## Final answer") < markdown.index("## Follow-up questions")
    assert "### Follow-up 2\n\n> Reads too?\n\n#### Answer\n\nYes, with replicas." in markdown


async def test_the_limit_refuses_the_next_follow_up_and_stores_nothing(
    engine: MakeEngine, model: FakeModelServer, store: Store
) -> None:
    """With FOLLOWUP_LIMIT 2 the second answer says none remain, and a third is refused."""
    service = engine(followup_limit=2)
    consultation_id = await finished(service, model)
    final = await store.get(consultation_id)
    assert final is not None
    first = await service.turns.follow_up(KEY, "One?")
    second = await service.turns.follow_up(KEY, "Two?")
    assert [(r.follow_up, r.follow_ups_left) for r in (first, second)] == [(1, 1), (2, 0)]
    calls = len(model.requests)
    with pytest.raises(FollowUpUnavailable) as refused:
        await service.turns.follow_up(KEY, "Three?")
    assert refused.value.reason is FollowUpReason.LIMIT_REACHED
    assert refused.value.code == "FOLLOW_UP_UNAVAILABLE"
    assert len(model.requests) == calls
    stored = await store.get(consultation_id)
    assert stored is not None and stored.messages[-1].text == "Reply to: Two?"


async def test_the_final_answer_says_how_many_follow_ups_it_takes(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """The final answer's reply carries FOLLOWUP_LIMIT as the follow-ups left (0 when off);
    a question round carries none."""
    service = engine(followup_limit=3)
    model.enqueue("A question?")
    first = await service.turns.ask(UserMessage(KEY, "Help"))
    final = await service.turns.answer_now(KEY)
    assert (first.follow_ups_left, final.follow_ups_left) == (0, 3)
    off = engine(followup_limit=0)
    model.enqueue("Answer.")
    await off.turns.ask(UserMessage("tg:2", "Help"))
    assert (await off.turns.answer_now("tg:2")).follow_ups_left == 0


async def test_follow_ups_off_are_refused_as_disabled(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """FOLLOWUP_LIMIT 0: every follow-up is refused as disabled, before anything is read."""
    service = engine(followup_limit=0)
    await finished(service, model)
    with pytest.raises(FollowUpUnavailable) as refused:
        await service.turns.follow_up(KEY, "More?")
    assert refused.value.reason is FollowUpReason.DISABLED


async def test_an_expired_consultation_takes_no_follow_up(
    service: Engine, model: FakeModelServer, clock: Clock
) -> None:
    """Past the session TTL since its last activity a consultation is refused as expired;
    just within it, it is answered."""
    await finished(service, model)
    clock.now += 3600
    await service.turns.follow_up(KEY, "Still there?")
    clock.now += 3601
    with pytest.raises(FollowUpUnavailable) as refused:
        await service.turns.follow_up(KEY, "And now?")
    assert refused.value.reason is FollowUpReason.EXPIRED


async def test_a_consultation_without_its_final_answer_takes_no_follow_up(
    service: Engine, model: FakeModelServer, store: Store
) -> None:
    """An active consultation (still in its rounds) is refused as not complete, and the chat
    without any as not found; nothing is stored."""
    with pytest.raises(FollowUpUnavailable) as none:
        await service.turns.follow_up(KEY, "Anything?")
    assert none.value.reason is FollowUpReason.NOT_FOUND
    model.enqueue("Which one?")
    first = await service.turns.ask(UserMessage(KEY, "Help me choose"))
    with pytest.raises(FollowUpUnavailable) as active:
        await service.turns.follow_up(KEY, "More?")
    assert active.value.reason is FollowUpReason.NOT_COMPLETE
    with pytest.raises(FollowUpUnavailable) as named:
        await service.turns.follow_up(KEY, "More?", consultation_id=first.consultation_id)
    assert named.value.reason is FollowUpReason.NOT_COMPLETE
    stored = await store.get(first.consultation_id)
    assert stored is not None and [m.text for m in stored.messages] == [
        "Help me choose",
        "Which one?",
    ]


async def test_another_chats_consultation_is_not_found(
    service: Engine, model: FakeModelServer, store: Store
) -> None:
    """A consultation id of another chat, with or without its hyphens, is as unknown as a
    forged one: not found, nothing stored in either chat."""
    theirs = await finished(service, model, key="tg:2")
    for forged in (theirs, theirs.replace("-", ""), "0" * 32, "x" * 5000):
        with pytest.raises(FollowUpUnavailable) as refused:
            await service.turns.follow_up(KEY, "Peek?", consultation_id=forged)
        assert refused.value.reason is FollowUpReason.NOT_FOUND
    stored = await store.get(theirs)
    assert stored is not None and len(stored.messages) == 4 and stored.follow_ups == 0


async def test_a_bare_id_of_the_chat_own_consultation_is_taken(
    service: Engine, model: FakeModelServer
) -> None:
    """The id as a button carries it (32 hex digits) names the chat's own consultation,
    even after a newer one started in the chat."""
    consultation_id = await finished(service, model)
    model.enqueue("Which topic?")
    await service.turns.ask(UserMessage(KEY, "A new question"))
    reply = await service.turns.follow_up(
        KEY, "Back to scaling?", consultation_id=consultation_id.replace("-", "")
    )
    assert reply.consultation_id == consultation_id and reply.follow_up == 1


async def test_an_empty_follow_up_is_refused_before_anything(
    service: Engine, model: FakeModelServer
) -> None:
    await finished(service, model)
    with pytest.raises(EmptyMessage):
        await service.turns.follow_up(KEY, " \u200b ")


async def test_a_follow_up_handled_twice_is_one_follow_up(
    service: Engine, model: FakeModelServer, store: Store
) -> None:
    """The same update again replays the stored answer without the model; the count, the
    messages and the round are unchanged."""
    consultation_id = await finished(service, model)
    model.enqueue("Pool them.")
    first = await service.turns.follow_up(KEY, "Connections?", turn_id="tg:5")
    calls = len(model.requests)
    again = await service.turns.follow_up(KEY, "Connections?", turn_id="tg:5")
    assert len(model.requests) == calls
    assert again.replayed and again.text == "Pool them."
    assert (again.follow_up, again.is_final, again.round) == (first.follow_up, True, first.round)
    stored = await store.get(consultation_id)
    assert stored is not None
    assert (stored.follow_ups, len(stored.messages), stored.current_round) == (1, 6, 2)


async def test_a_failed_follow_up_is_answered_when_handled_again(
    service: Engine, model: FakeModelServer, store: Store
) -> None:
    """A model failure leaves the follow-up stored and unanswered; the same update handled
    again answers it without storing it twice."""
    consultation_id = await finished(service, model)
    model.enqueue("upstream exploded", status=500)
    with pytest.raises(ModelError):
        await service.turns.follow_up(KEY, "Connections?", turn_id="tg:6")
    model.enqueue("Pool them.")
    reply = await service.turns.follow_up(KEY, "Connections?", turn_id="tg:6")
    assert (reply.text, reply.follow_up, reply.replayed) == ("Pool them.", 1, False)
    stored = await store.get(consultation_id)
    assert stored is not None
    assert [m.text for m in stored.messages[-2:]] == ["Connections?", "Pool them."]


async def test_an_unanswered_follow_up_of_an_expired_consultation_is_not_answered_again(
    service: Engine, model: FakeModelServer, clock: Clock
) -> None:
    await finished(service, model)
    model.enqueue("upstream exploded", status=500)
    with pytest.raises(ModelError):
        await service.turns.follow_up(KEY, "Connections?", turn_id="tg:6")
    clock.now += 7200
    with pytest.raises(TurnAlreadyHandled):
        await service.turns.follow_up(KEY, "Connections?", turn_id="tg:6")


async def test_a_replayed_final_answer_stays_final_after_follow_ups(
    service: Engine, model: FakeModelServer
) -> None:
    """The final answer's update handled again after follow-ups is still the final answer
    (not a follow-up), with the follow-ups left now."""
    await service.settings.set_max_rounds(KEY, 2)
    model.enqueue("Which database?")
    model.enqueue("Use PostgreSQL.")
    await service.turns.ask(UserMessage(KEY, "How do I scale?", turn_id="tg:1"))
    await service.turns.ask(UserMessage(KEY, "SQLite", turn_id="tg:2"))
    await service.turns.follow_up(KEY, "Why?", turn_id="tg:3")
    again = await service.turns.ask(UserMessage(KEY, "SQLite", turn_id="tg:2"))
    assert (again.replayed, again.is_final, again.follow_up, again.round) == (True, True, 0, 2)
    assert again.text == "Use PostgreSQL." and again.follow_ups_left == 4


async def test_a_reset_stops_a_running_follow_up(
    service: Engine, model: FakeModelServer, store: Store
) -> None:
    """A reset during the follow-up's model call stops it: TurnCancelled, its question kept,
    no answer stored, nothing counted."""
    consultation_id = await finished(service, model)
    model.enqueue("abc", endless=True, chunk_size=4, chunk_delay=0.01)
    streaming = asyncio.Event()

    async def on_text(shown: str) -> None:
        streaming.set()

    async with asyncio.timeout(GUARD):
        task = asyncio.create_task(service.turns.follow_up(KEY, "Connections?", on_text=on_text))
        await streaming.wait()
        await service.lifecycle.reset(KEY)
        with pytest.raises(TurnCancelled):
            await task
    stored = await store.get(consultation_id)
    assert stored is not None
    assert (stored.follow_ups, stored.messages[-1].text) == (0, "Connections?")


@pytest.fixture
async def any_store(kind: StoreKind, database: str) -> AsyncIterator[Store]:
    """Each store kind (SQLite, PostgreSQL) on a fresh database."""
    store = await kind.open(database)
    yield store
    await store.close()


async def test_a_follow_up_is_stored_once_and_replayed_on_each_store(
    any_store: Store, completer: OpenAICompleter, model: FakeModelServer
) -> None:
    """On SQLite and PostgreSQL alike: the follow-up and its answer are stored in the
    complete consultation, counted, and the same update again is replayed."""
    service = make_service(any_store, completer, Clock())
    consultation_id = await finished(service, model)
    model.enqueue("Pool them.")
    reply = await service.turns.follow_up(KEY, "Connections?", turn_id="tg:8")
    again = await service.turns.follow_up(KEY, "Connections?", turn_id="tg:8")
    assert (reply.follow_up, again.replayed, again.text, again.follow_up) == (
        1,
        True,
        "Pool them.",
        1,
    )
    stored = await any_store.get(consultation_id)
    assert stored is not None
    assert (stored.status, stored.current_round, stored.follow_ups) == (Status.COMPLETE, 2, 1)
    assert [m.text for m in stored.messages[-2:]] == ["Connections?", "Pool them."]
