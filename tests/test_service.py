"""The consultation service end to end over a real SQLite file and a scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.errors import (
    DialogCompleted,
    EmptyMessage,
    InvalidMaxRounds,
    ModelError,
    NoActiveConsultation,
    NothingToRetry,
    SessionNotFound,
)
from core.models import Role, Status
from core.outcomes import Notice
from core.prompts import EARLY_FINISH_MARKER, PromptLibrary
from core.requests import EngineConfig
from core.service import ConsultationService
from storage import SqliteStore
from tests.fakes.scripted_model import ScriptedModel

KEY = "tg:1"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = await SqliteStore.open(tmp_path / "db.sqlite3")
    yield store
    await store.close()


def make_service(
    store: SqliteStore, model: ScriptedModel, clock: Clock, **config: object
) -> ConsultationService:
    engine = EngineConfig(model="test-model", **config)  # type: ignore[arg-type]
    return ConsultationService(store, model, PromptLibrary(), engine, clock=clock)


@pytest.fixture
def service(store: SqliteStore, model: ScriptedModel, clock: Clock) -> ConsultationService:
    return make_service(store, model, clock)


def system_of(model: ScriptedModel, index: int = -1) -> str:
    return model.requests[index].messages[0]["content"]


async def test_three_round_consultation_ends_with_the_final_prompt(
    service: ConsultationService, model: ScriptedModel, store: SqliteStore
) -> None:
    """Rounds 1-2 ask questions; round 3 gets the final-round prompt with the original request."""
    model.enqueue("Which exercises?")
    model.enqueue("How long have you trained?")
    model.enqueue("## Plan\nDo 3x10.")
    first = await service.ask(KEY, "Help me pick weights")
    second = await service.ask(KEY, "Hammer curls, butterfly")
    third = await service.ask(KEY, "Beginner, 2 months")
    assert [(r.round, r.is_final, r.is_complete) for r in (first, second, third)] == [
        (1, False, False),
        (2, False, False),
        (3, True, True),
    ]
    assert Notice.STARTED in first.notices
    assert "round 1 of 3" in system_of(model, 0)
    final_system = system_of(model)
    assert "round 3 of 3" in final_system
    assert '"Help me pick weights"' in final_system
    assert [m["role"] for m in model.requests[-1].messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert (await store.get(third.consultation_id)).status is Status.COMPLETE  # type: ignore[union-attr]


async def test_message_after_completion_starts_fresh(
    service: ConsultationService, model: ScriptedModel
) -> None:
    """After the final answer the next message opens a new consultation with empty history."""
    await service.set_max_rounds(KEY, 1)
    done = await service.ask(KEY, "First question")
    assert done.is_complete
    fresh = await service.ask(KEY, "Second question")
    assert fresh.consultation_id != done.consultation_id
    assert [m["content"] for m in model.requests[-1].messages[1:]] == ["Second question"]


async def test_early_finish_marker_completes_and_is_hidden(
    service: ConsultationService, model: ScriptedModel
) -> None:
    """A marked answer in round 1 of 3 completes the consultation; the marker is never shown."""
    model.enqueue(f"{EARLY_FINISH_MARKER}\nHere is everything you need.")
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    reply = await service.ask(KEY, "Simple question", on_text=on_text)
    assert reply.is_final and reply.is_complete and reply.early_finish
    assert reply.text == "Here is everything you need."
    assert seen and all("[[" not in text for text in seen)


async def test_failure_keeps_the_message_and_the_round(
    service: ConsultationService, model: ScriptedModel, store: SqliteStore
) -> None:
    """A failure keeps the message, consumes no round; an identical resend is stored once."""
    model.fail_next()
    with pytest.raises(ModelError):
        await service.ask(KEY, "My question")
    active = await store.load_active(KEY)
    assert active is not None and active.current_round == 0
    assert [m.text for m in active.messages] == ["My question"]
    model.fail_next()
    with pytest.raises(ModelError):
        await service.ask(KEY, "My question")  # the same text again
    reply = await service.ask(KEY, "My question")
    assert reply.round == 1
    stored = await store.get(reply.consultation_id)
    assert stored is not None
    assert [(m.role, m.text) for m in stored.messages] == [
        (Role.USER, "My question"),
        (Role.ASSISTANT, "What else should I know?"),
    ]


async def test_new_message_after_failure_joins_the_open_turn(
    service: ConsultationService, model: ScriptedModel
) -> None:
    """After a failure a new message joins the round; the model sees both in one turn."""
    model.fail_next()
    with pytest.raises(ModelError):
        await service.ask(KEY, "Part one")
    reply = await service.ask(KEY, "Part two")
    assert reply.round == 1
    assert model.requests[-1].messages[1:] == [{"role": "user", "content": "Part one\n\nPart two"}]


async def test_retry_answers_the_open_turn(
    service: ConsultationService, model: ScriptedModel
) -> None:
    """/retry answers the waiting message; with nothing waiting it is refused."""
    with pytest.raises(NothingToRetry):
        await service.retry(KEY)
    model.fail_next()
    with pytest.raises(ModelError):
        await service.ask(KEY, "Question")
    reply = await service.retry(KEY)
    assert reply.round == 1
    with pytest.raises(NothingToRetry):
        await service.retry(KEY)


async def test_answer_now_gives_the_final_answer_early(
    service: ConsultationService, model: ScriptedModel
) -> None:
    """/answer in round 2 of 3 makes the model answer finally, with the final-now instruction."""
    with pytest.raises(NoActiveConsultation):
        await service.answer_now(KEY)
    await service.ask(KEY, "Question")
    reply = await service.answer_now(KEY)
    assert reply.is_final and reply.is_complete and reply.round == 2
    last = model.requests[-1].messages
    assert last[-1]["role"] == "user"
    assert '"Question"' in last[0]["content"]


async def test_lowering_rounds_mid_way_makes_the_next_reply_final(
    service: ConsultationService, model: ScriptedModel
) -> None:
    """With 2 rounds used, /rounds 2 makes the next message get the final answer."""
    await service.set_max_rounds(KEY, 5)
    await service.ask(KEY, "q1")
    await service.ask(KEY, "q2")
    change = await service.set_max_rounds(KEY, 2)
    assert change.active and change.rounds_done == 2 and change.next_is_final
    reply = await service.ask(KEY, "q3")
    assert reply.is_final and reply.is_complete


@pytest.mark.parametrize("value", [0, -1, 11, 100000])
async def test_invalid_rounds_change_nothing(service: ConsultationService, value: int) -> None:
    """Out-of-range round limits are refused and the setting stays."""
    with pytest.raises(InvalidMaxRounds):
        await service.set_max_rounds(KEY, value)
    assert (await service.status(KEY)).max_rounds == 3


async def test_reset_starts_over(service: ConsultationService, model: ScriptedModel) -> None:
    """After /reset the next message starts a new consultation."""
    first = await service.ask(KEY, "Old topic")
    assert await service.reset(KEY)
    assert not await service.reset(KEY)
    second = await service.ask(KEY, "New topic")
    assert second.consultation_id != first.consultation_id and second.round == 1


async def test_expiry_starts_a_new_consultation_and_says_so(
    service: ConsultationService, clock: Clock, store: SqliteStore
) -> None:
    """After the TTL of inactivity the next message starts fresh and carries the notice."""
    first = await service.ask(KEY, "Old")
    clock.now += 3601
    second = await service.ask(KEY, "New")
    assert Notice.PREVIOUS_EXPIRED in second.notices and second.round == 1
    old = await store.get(first.consultation_id)
    assert old is not None and old.status is Status.EXPIRED


async def test_restart_resumes_at_the_same_round(
    tmp_path: Path, model: ScriptedModel, clock: Clock
) -> None:
    """Closing and reopening the store continues the consultation at its round."""
    store = await SqliteStore.open(tmp_path / "db.sqlite3")
    await make_service(store, model, clock).ask(KEY, "Question")
    await store.close()
    reopened = await SqliteStore.open(tmp_path / "db.sqlite3")
    try:
        reply = await make_service(reopened, model, clock).ask(KEY, "Answer")
        assert reply.round == 2
    finally:
        await reopened.close()


async def test_same_chat_is_serialised_other_chats_run_in_parallel(
    store: SqliteStore, clock: Clock
) -> None:
    """Two calls for one chat never overlap; calls for different chats do."""
    running: dict[str, int] = {}
    overlap: dict[str, int] = {}

    class SlowModel(ScriptedModel):
        async def complete(self, request, on_delta=None):  # type: ignore[no-untyped-def]
            key = request.messages[1]["content"].split()[0]
            running[key] = running.get(key, 0) + 1
            overlap[key] = max(overlap.get(key, 0), running[key])
            overlap["all"] = max(overlap.get("all", 0), sum(running.values()))
            await asyncio.sleep(0.05)
            running[key] -= 1
            return await super().complete(request, on_delta)

    service = make_service(store, SlowModel(), clock)
    await asyncio.gather(
        service.ask("a", "a first"), service.ask("a", "a second"), service.ask("b", "b first")
    )
    assert overlap["a"] == 1
    assert overlap["all"] == 2


async def test_blank_text_is_refused(service: ConsultationService) -> None:
    """Whitespace-only messages never reach the store or the model."""
    with pytest.raises(EmptyMessage):
        await service.ask(KEY, "  \n\t ")


async def test_api_sessions(service: ConsultationService, model: ScriptedModel) -> None:
    """API sessions: continue by id, refuse unknown ids and completed dialogs."""
    first = await service.start_session(
        "Plan my trip", max_rounds=2, system_prompt="You are a guide"
    )
    assert (first.round, first.is_complete) == (1, False)
    assert "You are a guide" in system_of(model)
    second = await service.continue_session(first.consultation_id, "Two weeks in May")
    assert (second.round, second.is_complete) == (2, True)
    with pytest.raises(DialogCompleted):
        await service.continue_session(first.consultation_id, "more")
    with pytest.raises(SessionNotFound):
        await service.continue_session("00000000-0000-0000-0000-000000000000", "hi")


async def test_single_round_api_session_is_final_at_once(
    service: ConsultationService, model: ScriptedModel
) -> None:
    """Without maxRounds (1) the first reply is the final answer."""
    reply = await service.start_session("Quick question")
    assert reply.is_final and reply.is_complete and reply.round == 1
    assert "round 1 of 1" in system_of(model)


async def test_truncated_final_answer_is_continued(
    service: ConsultationService, model: ScriptedModel
) -> None:
    """A final answer cut by the token limit is continued and merged into the whole text."""
    model.enqueue("Step one: warm up. Step two:", finish_reason="length")
    model.enqueue(" lift.", finish_reason="stop")
    reply = await service.start_session("How to train?")
    assert reply.text == "Step one: warm up. Step two: lift."
    assert Notice.ANSWER_INCOMPLETE not in reply.notices
    continuation = model.requests[-1].messages
    assert continuation[-2] == {"role": "assistant", "content": "Step one: warm up. Step two:"}


async def test_cleanup_expires_and_purges(
    service: ConsultationService, clock: Clock, store: SqliteStore
) -> None:
    """The periodic cleanup expires idle consultations and later deletes them."""
    reply = await service.ask(KEY, "Old")
    clock.now += 4000
    assert await service.cleanup(retention_seconds=86400) == (1, 0)
    clock.now += 86401
    assert await service.cleanup(retention_seconds=86400) == (0, 1)
    assert await store.get(reply.consultation_id) is None


async def test_consultation_expired_by_cleanup_is_explained_once(
    service: ConsultationService, clock: Clock
) -> None:
    """After the periodic cleanup expired a consultation, the next message says so, once."""
    await service.ask(KEY, "Old")
    clock.now += 4000
    await service.cleanup(retention_seconds=86400)
    fresh = await service.ask(KEY, "New")
    assert Notice.PREVIOUS_EXPIRED in fresh.notices and fresh.round == 1
    later = await service.ask(KEY, "More")
    assert Notice.PREVIOUS_EXPIRED not in later.notices
