"""The consultation service end to end: a real SQLite file, and the model reached through the
real openai SDK (`core.llm.llm.OpenAICompleter`) talking HTTP to the fake model server, so a
model failure travels as it does in production (HTTP error → SDK exception → ModelError).

Only the test about the service's own locking drives an in-process scripted model: it
must hold a call open at an exact point, which is about the service, not the model."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from core.domain.asking import UserMessage
from core.domain.consultation import ModelOptions, Role, Status
from core.domain.errors import (
    ConsultationError,
    DialogCompleted,
    EmptyMessage,
    InvalidMaxRounds,
    ModelError,
    NoActiveConsultation,
    NothingToRetry,
    SessionNotFound,
    UnknownRole,
)
from core.domain.outcomes import Notice
from core.llm.llm import OpenAICompleter
from core.prompting.early_finish import EARLY_FINISH_MARKER
from core.prompting.prompts import PromptLibrary
from core.turns.engine import Engine
from fakes.model_server import FakeModelServer
from fakes.scripted_model import ScriptedModel
from storage.sqlite.store import SqliteStore
from tests.service_harness import Clock, make_service

KEY = "tg:1"
TTL = 3600


def fail_next(model: FakeModelServer, status: int = 500) -> None:
    """The next model call fails with an HTTP error (the SDK does not retry here)."""
    model.enqueue("upstream exploded", status=status)


def messages_of(model: FakeModelServer, index: int = -1) -> list[dict[str, Any]]:
    return list(model.requests[index]["messages"])


def system_of(model: FakeModelServer, index: int = -1) -> str:
    return str(messages_of(model, index)[0]["content"])


async def stored(store: SqliteStore, consultation_id: str) -> list[tuple[Role, str]]:
    consultation = await store.get(consultation_id)
    assert consultation is not None
    return [(m.role, m.text) for m in consultation.messages]


async def test_three_round_consultation_ends_with_the_final_prompt(
    service: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """Rounds 1-2 ask questions; round 3 gets the final-round prompt with the original request."""
    model.enqueue("Which exercises?")
    model.enqueue("How long have you trained?")
    model.enqueue("## Plan\nDo 3x10.")
    first = await service.turns.ask(UserMessage(KEY, "Help me pick weights"))
    second = await service.turns.ask(UserMessage(KEY, "Hammer curls, butterfly"))
    third = await service.turns.ask(UserMessage(KEY, "Beginner, 2 months"))
    assert [(r.round, r.is_final, r.is_complete) for r in (first, second, third)] == [
        (1, False, False),
        (2, False, False),
        (3, True, True),
    ]
    assert Notice.STARTED in first.notices
    assert "round 1 of 3" in system_of(model, 0)
    final_system = system_of(model)
    assert "round 3 of 3" in final_system
    assert "\n> Help me pick weights\n" in final_system
    assert [m["role"] for m in messages_of(model)] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert (await store.get(third.consultation_id)).status is Status.COMPLETE  # type: ignore[union-attr]


async def test_message_after_completion_starts_fresh(
    service: Engine, model: FakeModelServer
) -> None:
    """After the final answer the next message opens a new consultation with empty history."""
    await service.settings.set_max_rounds(KEY, 1)
    done = await service.turns.ask(UserMessage(KEY, "First question"))
    assert done.is_complete
    fresh = await service.turns.ask(UserMessage(KEY, "Second question"))
    assert fresh.consultation_id != done.consultation_id
    assert [m["content"] for m in messages_of(model)[1:]] == ["Second question"]


async def test_early_finish_marker_completes_and_is_hidden(
    service: Engine, model: FakeModelServer
) -> None:
    """A marked answer in round 1 of 3 completes the consultation; the marker is never shown."""
    model.enqueue(f"{EARLY_FINISH_MARKER}\nHere is everything you need.")
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    reply = await service.turns.ask(UserMessage(KEY, "Simple question", on_text=on_text))
    assert reply.is_final and reply.is_complete and reply.early_finish
    assert reply.text == "Here is everything you need."
    assert seen and all("[[" not in text for text in seen)


async def test_failure_keeps_the_message_and_the_round(
    service: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """A failure keeps the message, consumes no round; an identical resend is stored once."""
    fail_next(model)
    with pytest.raises(ModelError):
        await service.turns.ask(UserMessage(KEY, "My question"))
    active = await store.load_active(KEY)
    assert active is not None and active.current_round == 0
    assert [m.text for m in active.messages] == ["My question"]
    fail_next(model)
    with pytest.raises(ModelError):
        await service.turns.ask(UserMessage(KEY, "My question"))  # the same text again
    reply = await service.turns.ask(UserMessage(KEY, "My question"))
    assert reply.round == 1
    stored = await store.get(reply.consultation_id)
    assert stored is not None
    assert [(m.role, m.text) for m in stored.messages] == [
        (Role.USER, "My question"),
        (Role.ASSISTANT, "Reply to: My question"),
    ]


async def test_new_message_after_failure_joins_the_open_turn(
    service: Engine, model: FakeModelServer
) -> None:
    """After a failure a new message joins the round; the model sees both in one turn."""
    fail_next(model)
    with pytest.raises(ModelError):
        await service.turns.ask(UserMessage(KEY, "Part one"))
    reply = await service.turns.ask(UserMessage(KEY, "Part two"))
    assert reply.round == 1
    assert messages_of(model)[1:] == [{"role": "user", "content": "Part one\n\nPart two"}]


async def test_retry_answers_the_open_turn(service: Engine, model: FakeModelServer) -> None:
    """/retry answers the waiting message; with nothing waiting it is refused."""
    with pytest.raises(NothingToRetry):
        await service.turns.retry(KEY)
    fail_next(model)
    with pytest.raises(ModelError):
        await service.turns.ask(UserMessage(KEY, "Question"))
    reply = await service.turns.retry(KEY)
    assert reply.round == 1
    with pytest.raises(NothingToRetry):
        await service.turns.retry(KEY)


async def test_answer_now_gives_the_final_answer_early(
    service: Engine, model: FakeModelServer
) -> None:
    """/answer in round 2 of 3 makes the model answer finally, with the final-now instruction."""
    with pytest.raises(NoActiveConsultation):
        await service.turns.answer_now(KEY)
    await service.turns.ask(UserMessage(KEY, "Question"))
    reply = await service.turns.answer_now(KEY)
    assert reply.is_final and reply.is_complete and reply.round == 2
    last = messages_of(model)
    assert last[-1]["role"] == "user"
    assert "\n> Question\n" in last[0]["content"]


async def test_lowering_rounds_mid_way_makes_the_next_reply_final(
    service: Engine, model: FakeModelServer
) -> None:
    """With 2 rounds used, /rounds 2 makes the next message get the final answer."""
    await service.settings.set_max_rounds(KEY, 5)
    await service.turns.ask(UserMessage(KEY, "q1"))
    await service.turns.ask(UserMessage(KEY, "q2"))
    change = await service.settings.set_max_rounds(KEY, 2)
    assert change.active and change.rounds_done == 2 and change.next_is_final
    reply = await service.turns.ask(UserMessage(KEY, "q3"))
    assert reply.is_final and reply.is_complete


@pytest.mark.parametrize("value", [0, -1, 11, 100000])
async def test_invalid_rounds_change_nothing(service: Engine, value: int) -> None:
    """Out-of-range round limits are refused and the setting stays."""
    with pytest.raises(InvalidMaxRounds):
        await service.settings.set_max_rounds(KEY, value)
    assert (await service.turns.status(KEY)).max_rounds == 3


async def test_reset_starts_over(service: Engine, model: FakeModelServer) -> None:
    """After /reset the next message starts a new consultation."""
    first = await service.turns.ask(UserMessage(KEY, "Old topic"))
    assert await service.lifecycle.reset(KEY)
    assert not await service.lifecycle.reset(KEY)
    second = await service.turns.ask(UserMessage(KEY, "New topic"))
    assert second.consultation_id != first.consultation_id and second.round == 1


async def test_expiry_starts_a_new_consultation_and_says_so(
    service: Engine, clock: Clock, store: SqliteStore
) -> None:
    """After the TTL of inactivity the next message starts fresh and carries the notice."""
    first = await service.turns.ask(UserMessage(KEY, "Old"))
    clock.now += 3601
    second = await service.turns.ask(UserMessage(KEY, "New"))
    assert Notice.PREVIOUS_EXPIRED in second.notices and second.round == 1
    old = await store.get(first.consultation_id)
    assert old is not None and old.status is Status.EXPIRED


async def test_restart_resumes_at_the_same_round(
    tmp_path: Path, completer: OpenAICompleter, clock: Clock
) -> None:
    """Closing and reopening the store continues the consultation at its round."""
    store = await SqliteStore.open(tmp_path / "db.sqlite3")
    await make_service(store, completer, clock).turns.ask(UserMessage(KEY, "Question"))
    await store.close()
    reopened = await SqliteStore.open(tmp_path / "db.sqlite3")
    try:
        reply = await make_service(reopened, completer, clock).turns.ask(UserMessage(KEY, "Answer"))
        assert reply.round == 2
    finally:
        await reopened.close()


async def test_same_chat_is_serialised_other_chats_run_in_parallel(
    store: SqliteStore, clock: Clock
) -> None:
    """Two calls for one chat never overlap; calls for different chats do.

    Uses the in-process scripted model: the test holds the first call of chat "a" open
    until chat "b"'s whole call has finished, which a model behind HTTP cannot be told
    to do. If chat "b" waited for chat "a", the held call would never be released (the
    `wait_for` fails); if chat "a"'s second call did not wait, it would enter the model
    while the first is held (it started before "b" and does the same work).
    """
    running: dict[str, int] = {"a": 0, "b": 0}
    overlap = {"a": 0, "all": 0}
    b_done = asyncio.Event()

    class HeldModel(ScriptedModel):
        async def complete(self, request, on_delta=None):  # type: ignore[no-untyped-def]
            key = request.messages[-1]["content"].split()[0]
            running[key] += 1
            overlap["a"] = max(overlap["a"], running["a"])
            overlap["all"] = max(overlap["all"], sum(running.values()))
            try:
                if request.messages[-1]["content"] == "a first":
                    await asyncio.wait_for(b_done.wait(), 10)
                return await super().complete(request, on_delta)
            finally:
                running[key] -= 1

    service = make_service(store, HeldModel(), clock)

    async def ask_b() -> None:
        await service.turns.ask(UserMessage("b", "b first"))
        b_done.set()

    await asyncio.gather(
        service.turns.ask(UserMessage("a", "a first")),
        service.turns.ask(UserMessage("a", "a second")),
        ask_b(),
    )
    assert overlap == {"a": 1, "all": 2}


@pytest.mark.parametrize("text", ["", "  \n\t "])
async def test_blank_text_is_refused(
    service: Engine, model: FakeModelServer, store: SqliteStore, text: str
) -> None:
    """Empty and whitespace-only messages never reach the store or the model."""
    with pytest.raises(EmptyMessage):
        await service.turns.ask(UserMessage(KEY, text))
    with pytest.raises(EmptyMessage):
        await service.sessions.start_session(text)
    assert await store.load_active(KEY) is None
    assert model.requests == []


async def test_api_sessions(service: Engine, model: FakeModelServer) -> None:
    """API sessions: continue by id, refuse unknown ids and completed dialogs."""
    first = await service.sessions.start_session(
        "Plan my trip", max_rounds=2, system_prompt="You are a guide"
    )
    assert (first.round, first.is_complete) == (1, False)
    assert "You are a guide" in system_of(model)
    second = await service.sessions.continue_session(first.consultation_id, "Two weeks in May")
    assert (second.round, second.is_complete) == (2, True)
    with pytest.raises(DialogCompleted):
        await service.sessions.continue_session(first.consultation_id, "more")
    with pytest.raises(SessionNotFound):
        await service.sessions.continue_session("00000000-0000-0000-0000-000000000000", "hi")


async def test_single_round_api_session_is_final_at_once(
    service: Engine, model: FakeModelServer
) -> None:
    """Without maxRounds (1) the first reply is the final answer."""
    reply = await service.sessions.start_session("Quick question")
    assert reply.is_final and reply.is_complete and reply.round == 1
    assert "round 1 of 1" in system_of(model)


async def test_truncated_final_answer_is_continued(service: Engine, model: FakeModelServer) -> None:
    """A final answer cut by the token limit is continued and merged into the whole text."""
    model.enqueue("Step one: warm up. Step two:", finish_reason="length")
    model.enqueue(" lift.", finish_reason="stop")
    reply = await service.sessions.start_session("How to train?")
    assert reply.text == "Step one: warm up. Step two: lift."
    assert Notice.ANSWER_INCOMPLETE not in reply.notices
    continuation = messages_of(model)
    assert continuation[-2] == {"role": "assistant", "content": "Step one: warm up. Step two:"}


async def test_cleanup_expires_and_purges(
    service: Engine, clock: Clock, store: SqliteStore
) -> None:
    """The periodic cleanup expires idle consultations and later deletes them."""
    reply = await service.turns.ask(UserMessage(KEY, "Old"))
    clock.now += 4000
    assert await service.lifecycle.cleanup(retention_seconds=86400) == (1, 0)
    clock.now += 86401
    assert await service.lifecycle.cleanup(retention_seconds=86400) == (0, 1)
    assert await store.get(reply.consultation_id) is None


async def test_consultation_expired_by_cleanup_is_explained_once(
    service: Engine, clock: Clock
) -> None:
    """After the periodic cleanup expired a consultation, the next message says so, once."""
    await service.turns.ask(UserMessage(KEY, "Old"))
    clock.now += 4000
    await service.lifecycle.cleanup(retention_seconds=86400)
    fresh = await service.turns.ask(UserMessage(KEY, "New"))
    assert Notice.PREVIOUS_EXPIRED in fresh.notices and fresh.round == 1
    later = await service.turns.ask(UserMessage(KEY, "More"))
    assert Notice.PREVIOUS_EXPIRED not in later.notices


def consultation_count(tmp_path: Path) -> int:
    """How many consultations the database file holds, read with a connection of its own."""
    with sqlite3.connect(tmp_path / "db.sqlite3") as db:
        return int(db.execute("SELECT count(*) FROM consultations").fetchone()[0])


async def test_blank_text_opens_no_api_session(
    service: Engine, model: FakeModelServer, tmp_path: Path
) -> None:
    """A blank first API message stores no session at all."""
    with pytest.raises(EmptyMessage):
        await service.sessions.open_session(" ")
    assert consultation_count(tmp_path) == 0 and model.requests == []


async def test_every_message_is_stored_before_the_model_is_called(
    service: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """While the model is still answering round 2, its message is already in the store."""
    await service.turns.ask(UserMessage(KEY, "Plan my week"))
    release = asyncio.Event()
    model.enqueue("Which days?", hold=release)
    answering = asyncio.create_task(service.turns.ask(UserMessage(KEY, "Mostly evenings")))
    await model.wait_requests(2)
    active = await store.load_active(KEY)
    assert active is not None
    assert [m.text for m in active.messages] == [
        "Plan my week",
        "Reply to: Plan my week",
        "Mostly evenings",
    ]
    release.set()
    assert (await answering).round == 2


async def test_failed_second_round_keeps_its_message(
    service: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """A model failure in round 2 keeps the round-2 message as the open turn and consumes
    no round; /retry answers that message as round 2."""
    await service.turns.ask(UserMessage(KEY, "Plan my week"))
    fail_next(model)
    with pytest.raises(ModelError):
        await service.turns.ask(UserMessage(KEY, "Mostly evenings"))
    active = await store.load_active(KEY)
    assert active is not None and active.current_round == 1
    assert [(m.role, m.text) for m in active.messages] == [
        (Role.USER, "Plan my week"),
        (Role.ASSISTANT, "Reply to: Plan my week"),
        (Role.USER, "Mostly evenings"),
    ]
    reply = await service.turns.retry(KEY)
    assert reply.round == 2
    assert messages_of(model)[-1] == {"role": "user", "content": "Mostly evenings"}


async def test_answer_now_on_a_failed_turn_answers_that_message(
    service: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """/answer while a failed message waits: that message is the final turn as it is (no
    "final answer now" request is added to it), and the reply completes the consultation."""
    await service.turns.ask(UserMessage(KEY, "Question"))
    fail_next(model)
    with pytest.raises(ModelError):
        await service.turns.ask(UserMessage(KEY, "Details"))
    reply = await service.turns.answer_now(KEY)
    assert reply.is_final and reply.is_complete and reply.round == 2
    assert messages_of(model)[-1] == {"role": "user", "content": "Details"}
    assert await stored(store, reply.consultation_id) == [
        (Role.USER, "Question"),
        (Role.ASSISTANT, "Reply to: Question"),
        (Role.USER, "Details"),
        (Role.ASSISTANT, "Reply to: Details"),
    ]


async def test_answer_now_without_a_waiting_message_asks_for_the_answer(
    service: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """/answer after a reply stores the "final answer now" request as the final turn."""
    first = await service.turns.ask(UserMessage(KEY, "Question"))
    await service.turns.answer_now(KEY)
    request = PromptLibrary().render("final_now_request")
    assert messages_of(model)[-1] == {"role": "user", "content": request}
    assert [text for _, text in await stored(store, first.consultation_id)][2] == request


@pytest.mark.parametrize("text", ["", " \n ", EARLY_FINISH_MARKER])
async def test_empty_model_reply_is_a_failure_not_a_round(
    service: Engine, model: FakeModelServer, store: SqliteStore, text: str
) -> None:
    """A reply with nothing to show (empty, blank, only the marker) is a model failure: no
    round is consumed, nothing is stored for it, and the message stays the open turn."""
    model.enqueue(text)
    with pytest.raises(ModelError):
        await service.turns.ask(UserMessage(KEY, "Question"))
    active = await store.load_active(KEY)
    assert active is not None and active.current_round == 0
    assert [(m.role, m.text) for m in active.messages] == [(Role.USER, "Question")]


async def test_answer_stopped_by_the_content_filter_is_marked_incomplete(
    service: Engine, model: FakeModelServer
) -> None:
    """A reply the provider's content filter cut short is delivered with the incomplete note."""
    model.enqueue("Here is the first half", finish_reason="content_filter")
    reply = await service.turns.ask(UserMessage(KEY, "Question"))
    assert reply.text == "Here is the first half"
    assert Notice.ANSWER_INCOMPLETE in reply.notices


async def test_json_answer_continued_with_a_restated_fence_is_one_object(
    service: Engine, model: FakeModelServer
) -> None:
    """A JSON answer cut off inside a code fence, whose continuation opens the fence again,
    is merged into one valid object without repairs."""
    model.enqueue('```json\n{"city": "Rome", "note": "book ea', finish_reason="length")
    model.enqueue('```json\nrly"}\n```')
    reply = await service.sessions.start_session("Plan", options=ModelOptions(output_format="json"))
    assert reply.json_valid is True
    assert json.loads(reply.text) == {"city": "Rome", "note": "book early"}


async def test_api_cannot_reach_a_telegram_consultation(
    service: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """A chat consultation's id is no API session: continuing, checking or re-limiting it
    is refused as unknown, and the consultation is left as it was."""
    chat = await service.turns.ask(UserMessage(KEY, "Private matter"))
    with pytest.raises(SessionNotFound):
        await service.sessions.continue_session(chat.consultation_id, "let me in")
    with pytest.raises(SessionNotFound):
        await service.sessions.check_session(chat.consultation_id)
    with pytest.raises(SessionNotFound):
        await service.sessions.set_session_max_rounds(chat.consultation_id, 1)
    after = await store.get(chat.consultation_id)
    assert after is not None and (after.max_rounds, after.current_round) == (3, 1)
    assert [m.text for m in after.messages] == ["Private matter", "Reply to: Private matter"]
    assert len(model.requests) == 1


async def test_api_session_expires_after_the_ttl(
    service: Engine, model: FakeModelServer, store: SqliteStore, clock: Clock
) -> None:
    """An API session idle for exactly the TTL still continues; one idle longer is refused
    as expired (and marked so), and the late message is not stored."""
    first = await service.sessions.start_session("Plan my trip", max_rounds=3)
    clock.now += TTL
    await service.sessions.continue_session(first.consultation_id, "Two weeks")
    clock.now += TTL + 1
    with pytest.raises(SessionNotFound, match="expired"):
        await service.sessions.continue_session(first.consultation_id, "Too late")
    with pytest.raises(SessionNotFound):
        await service.sessions.check_session(first.consultation_id)
    expired = await store.get(first.consultation_id)
    assert expired is not None and expired.status is Status.EXPIRED
    assert "Too late" not in [m.text for m in expired.messages]
    assert len(model.requests) == 2


async def test_status_of_an_idle_consultation_is_inactive(service: Engine, clock: Clock) -> None:
    """/status reports a consultation idle past the TTL as over (the next message starts
    afresh), and one idle for exactly the TTL as still active."""
    await service.turns.ask(UserMessage(KEY, "Old"))
    clock.now += TTL
    assert (await service.turns.status(KEY)).active
    clock.now += 1
    status = await service.turns.status(KEY)
    assert not status.active and status.rounds_done == 0


async def test_an_unknown_role_is_refused_with_its_own_code(
    service: Engine, store: SqliteStore
) -> None:
    """A role the prompt library lacks raises UnknownRole (a ConsultationError the edges
    already show as a refusal) and leaves the chat's settings as they were."""
    role = next(iter(service.settings.roles()))
    await service.settings.set_role(KEY, role)
    with pytest.raises(UnknownRole) as refused:
        await service.settings.set_role(KEY, "astrologer")
    assert isinstance(refused.value, ConsultationError)
    assert refused.value.code == "UNKNOWN_ROLE"
    assert (await store.load_chat_settings(KEY)).role == role
