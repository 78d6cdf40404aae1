"""Turn ids: one update handled twice (a redelivery, or a worker that died after answering)
becomes one turn in the history. A real SQLite file, the model behind the real openai SDK
talking to the fake model server; the model's request count says whether it was called.

- answered → the stored reply is handed back (`replayed`), the model is not called and
  nothing is stored;
- stored but unanswered in the open turn → the open turn is answered, the message is not
  stored again;
- the consultation moved on without answering it → `TurnAlreadyHandled`, nothing happens.
"""

from __future__ import annotations

from typing import cast

import pytest

from core.domain.asking import RoundRef, UserMessage
from core.domain.consultation import Consultation, Role, TurnRecord
from core.domain.errors import AnswerStale, ModelError, TurnAlreadyHandled, TurnSuperseded
from core.domain.ports import ConsultationStore
from core.llm.llm import OpenAICompleter
from core.turns.engine import Engine
from fakes.model_server import FakeModelServer
from storage.sqlite.store import SqliteStore
from tests.service_harness import make_service

KEY = "tg:42"


async def history(store: SqliteStore) -> list[tuple[Role, str, str | None]]:
    """Every message of the chat's latest consultation: role, text, turn id."""
    found = (await store.load_turn(KEY, "tg:1"))[0]
    assert found is not None
    return [(m.role, m.text, m.turn_id) for m in found.consultation.messages]


async def test_user_messages_are_stored_with_their_turn_ids(
    service: Engine, store: SqliteStore, model_server: FakeModelServer
) -> None:
    """The message that starts the consultation and a later one both keep their turn id."""
    model_server.enqueue("Which workload?")
    await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))
    await service.turns.ask(UserMessage(KEY, "Mostly reads", turn_id="tg:2"))
    assert [(role, turn) for role, _, turn in await history(store)] == [
        (Role.USER, "tg:1"),
        (Role.ASSISTANT, None),
        (Role.USER, "tg:2"),
        (Role.ASSISTANT, None),
    ]


async def test_an_answered_turn_handled_again_is_replayed_without_the_model(
    service: Engine, store: SqliteStore, model_server: FakeModelServer
) -> None:
    model_server.enqueue("Which workload?")
    first = await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))
    again = await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))

    assert len(model_server.requests) == 1
    assert again.replayed and not first.replayed
    assert (again.text, again.consultation_id, again.round, again.max_rounds) == (
        "Which workload?",
        first.consultation_id,
        1,
        3,
    )
    assert (again.is_final, again.is_complete) == (False, False)
    assert [text for _, text, _ in await history(store)] == ["Pick a database", "Which workload?"]


async def test_a_replayed_final_answer_is_final_and_complete(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer
) -> None:
    service = make_service(store, completer, default_max_rounds=1)
    model_server.enqueue("Use PostgreSQL.")
    first = await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))
    again = await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))

    assert first.is_complete and again.replayed
    assert (again.text, again.round, again.max_rounds, again.is_final, again.is_complete) == (
        "Use PostgreSQL.",
        1,
        1,
        True,
        True,
    )
    assert len(model_server.requests) == 1
    # A new message (another update) starts a new consultation as usual.
    await service.turns.ask(UserMessage(KEY, "And for caching?", turn_id="tg:2"))
    assert len(model_server.requests) == 2


async def test_a_replay_of_an_earlier_round_reads_as_that_round(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer
) -> None:
    """A reply the consultation went on from was a question round, not the answer, even
    once the consultation is complete."""
    service = make_service(store, completer, default_max_rounds=2)
    model_server.enqueue("Which workload?")
    model_server.enqueue("Use PostgreSQL.")
    await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))
    final = await service.turns.ask(UserMessage(KEY, "Mostly reads", turn_id="tg:2"))
    assert final.is_complete

    again = await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))
    assert again.replayed
    assert (again.text, again.round, again.max_rounds, again.is_final, again.is_complete) == (
        "Which workload?",
        1,
        2,
        False,
        False,
    )
    assert len(model_server.requests) == 2


async def test_an_unanswered_turn_handled_again_is_answered_without_storing_it_again(
    service: Engine, store: SqliteStore, model_server: FakeModelServer
) -> None:
    """Two messages failed; the first one's update comes again: the open turn (both
    messages, each stored once) is answered."""
    model_server.enqueue("boom", status=500)
    model_server.enqueue("boom", status=500)
    for turn, text in (("tg:1", "Pick a database"), ("tg:2", "For a shop")):
        with pytest.raises(ModelError):
            await service.turns.ask(UserMessage(KEY, text, turn_id=turn))
    model_server.enqueue("Which workload?")

    reply = await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))

    assert not reply.replayed and reply.text == "Which workload?" and reply.round == 1
    assert len(model_server.requests) == 3
    sent = [m["content"] for m in model_server.requests[-1]["messages"] if m["role"] == "user"]
    assert sent == ["Pick a database\n\nFor a shop"]  # one turn: the two messages merged
    assert await history(store) == [
        (Role.USER, "Pick a database", "tg:1"),
        (Role.USER, "For a shop", "tg:2"),
        (Role.ASSISTANT, "Which workload?", None),
    ]


async def test_a_turn_whose_consultation_was_reset_is_not_handled_again(
    service: Engine, store: SqliteStore, model_server: FakeModelServer
) -> None:
    """The turn failed and the user reset the chat: its update coming again neither starts
    a consultation nor calls the model; `TurnAlreadyHandled` says so (a `TurnSuperseded`:
    the edges already treat that as nothing left to say)."""
    model_server.enqueue("boom", status=500)
    with pytest.raises(ModelError):
        await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))
    assert await service.lifecycle.reset(KEY)

    with pytest.raises(TurnAlreadyHandled) as raised:
        await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))

    assert isinstance(raised.value, TurnSuperseded)
    assert len(model_server.requests) == 1
    assert await store.load_active(KEY) is None
    assert [text for _, text, _ in await history(store)] == ["Pick a database"]


async def test_answer_now_handled_twice_replays_the_final_answer(
    service: Engine, store: SqliteStore, model_server: FakeModelServer
) -> None:
    model_server.enqueue("Which workload?")
    model_server.enqueue("Use PostgreSQL.")
    await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))
    first = await service.turns.answer_now(KEY, turn_id="tg:2", language="en")
    again = await service.turns.answer_now(KEY, turn_id="tg:2", language="en")

    assert len(model_server.requests) == 2
    assert again.replayed and again.is_final and again.is_complete
    assert (again.text, again.round) == (first.text, first.round) == ("Use PostgreSQL.", 2)
    stored = await history(store)
    assert [turn for role, _, turn in stored if role is Role.USER] == ["tg:1", "tg:2"]
    assert len(stored) == 4


async def test_answer_now_unanswered_is_answered_as_the_final_answer(
    service: Engine, store: SqliteStore, model_server: FakeModelServer
) -> None:
    """The request for the answer was stored and the model failed: the same update again
    answers it, with the final answer, storing the request once."""
    model_server.enqueue("Which workload?")
    await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))
    model_server.enqueue("boom", status=500)
    with pytest.raises(ModelError):
        await service.turns.answer_now(KEY, turn_id="tg:2", language="en")
    model_server.enqueue("Use PostgreSQL.")

    reply = await service.turns.answer_now(KEY, turn_id="tg:2", language="en")

    assert not reply.replayed and reply.is_final and reply.is_complete
    assert len(model_server.requests) == 3
    stored = await history(store)
    assert [turn for role, _, turn in stored if role is Role.USER] == ["tg:1", "tg:2"]
    assert stored[-1] == (Role.ASSISTANT, "Use PostgreSQL.", None)


class CountingStore:
    """The real store, counting the turn ids it is asked to look up."""

    def __init__(self, inner: SqliteStore) -> None:
        self._inner = inner
        self.lookups = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def load_turn(
        self, chat_key: str, turn_id: str | None
    ) -> tuple[TurnRecord | None, Consultation | None]:
        self.lookups += turn_id is not None
        return await self._inner.load_turn(chat_key, turn_id)


async def test_a_turn_is_looked_up_only_when_it_has_an_id(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer
) -> None:
    counting = CountingStore(store)
    service = make_service(cast(ConsultationStore, counting), completer)
    await service.turns.ask(UserMessage(KEY, "Pick a database"))
    await service.turns.answer_now(KEY, language="en")
    assert counting.lookups == 0
    await service.turns.ask(UserMessage(KEY, "Another one", turn_id="tg:7"))
    assert counting.lookups == 1


async def test_answer_now_from_a_rounds_button_is_stale_under_another_round(
    service: Engine, store: SqliteStore, model_server: FakeModelServer
) -> None:
    """`ref` names the round whose "answer now" was pressed: an older round, another
    consultation or none active is `AnswerStale` with nothing stored; the current round
    gets the final answer, and the same press handled again replays it."""
    model_server.enqueue("Which workload?")
    model_server.enqueue("How large?")
    model_server.enqueue("Use PostgreSQL.")
    first = await service.turns.ask(UserMessage(KEY, "Pick a database", turn_id="tg:1"))
    bare = first.consultation_id.replace("-", "")
    await service.turns.ask(UserMessage(KEY, "Mostly reads", turn_id="tg:2"))
    before = await history(store)

    for stale in (RoundRef(bare, 1), RoundRef("0" * 32, 2)):
        with pytest.raises(AnswerStale):
            await service.turns.answer_now(KEY, turn_id="tg:3", language="en", ref=stale)
    assert await history(store) == before and len(model_server.requests) == 2

    final = await service.turns.answer_now(
        KEY, turn_id="tg:4", language="en", ref=RoundRef(bare, 2)
    )
    again = await service.turns.answer_now(
        KEY, turn_id="tg:4", language="en", ref=RoundRef(bare, 2)
    )
    assert final.is_complete and again.replayed and again.text == final.text == "Use PostgreSQL."
    with pytest.raises(AnswerStale):  # nothing is active any more
        await service.turns.answer_now(KEY, turn_id="tg:5", language="en", ref=RoundRef(bare, 2))
    assert len(model_server.requests) == 3
