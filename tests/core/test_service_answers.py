"""How the service bounds and judges one answer: streams that end early, endless streams,
the early-finish marker in ordinary text, and huge user messages — end to end over the
real openai SDK, the fake model server and a real SQLite file."""

from __future__ import annotations

import asyncio
import json

from core.domain.asking import UserMessage
from core.domain.outcomes import Notice
from core.turns.engine import Engine
from fakes.model_server import FakeModelServer
from tests.core.test_service import KEY
from tests.service_harness import MakeEngine


async def test_a_final_answer_whose_stream_ends_early_is_continued(
    service: Engine, model: FakeModelServer
) -> None:
    """A final answer whose stream just ends (HTTP 200, no finish_reason) is continued."""
    await service.settings.set_max_rounds(KEY, 1)
    model.enqueue("Plan: squats on Monday, deadl", stop_early=True)
    model.enqueue("deadlifts on Thursday.")

    reply = await service.turns.ask(UserMessage(KEY, "Plan my week"))

    assert reply.text == "Plan: squats on Monday, deadlifts on Thursday."
    assert Notice.ANSWER_INCOMPLETE not in reply.notices
    assert len(model.requests) == 2


async def test_a_question_round_cut_off_is_shown_as_it_is(
    service: Engine, model: FakeModelServer
) -> None:
    """A clarifying round that ends early or hits the token limit is not continued: it is
    shown as it is, marked incomplete, and the round is used."""
    model.enqueue("1. How often do you tr", stop_early=True)
    model.enqueue("1. Which exercises do y", finish_reason="length")

    first = await service.turns.ask(UserMessage(KEY, "Plan my week"))
    second = await service.turns.ask(UserMessage(KEY, "Three times"))

    assert (first.text, first.round, first.is_final) == ("1. How often do you tr", 1, False)
    assert Notice.ANSWER_INCOMPLETE in first.notices
    assert (second.text, second.round) == ("1. Which exercises do y", 2)
    assert Notice.ANSWER_INCOMPLETE in second.notices
    assert len(model.requests) == 2


async def test_an_early_final_answer_cut_off_is_continued(
    service: Engine, model: FakeModelServer
) -> None:
    """A marked (final) answer in a question round is a final answer: it is continued."""
    model.enqueue("[[FINAL]]\nSquats on Monday, deadl", finish_reason="length")
    model.enqueue("deadlifts on Thursday.")

    reply = await service.turns.ask(UserMessage(KEY, "Plan my week"))

    assert reply.text == "Squats on Monday, deadlifts on Thursday."
    assert reply.is_final and reply.is_complete


async def test_an_endless_answer_is_cut_at_max_answer_chars(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """A stream that never ends is read up to MAX_ANSWER_CHARS, closed, and delivered as
    an incomplete answer; the progress display never shows more than that."""
    service = engine(max_answer_chars=3000)
    await service.settings.set_max_rounds(KEY, 1)
    # Longer than the cap before it repeats: a stream that repeats itself is a loop, stopped
    # earlier (tests/core/test_repetition.py).
    model.enqueue("".join(f"Bean {i}. " for i in range(400)), endless=True, chunk_size=4)
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    reply = await asyncio.wait_for(
        service.turns.ask(UserMessage(KEY, "Tell me all", on_text=on_text)), 60
    )

    assert len(reply.text) == 3000 and reply.text.startswith("Bean 0. Bean 1")
    assert Notice.ANSWER_INCOMPLETE in reply.notices and reply.is_complete
    assert len(model.requests) == 1
    assert shown and max(map(len, shown)) <= 3000


async def test_the_marker_inside_a_reply_is_plain_text(
    service: Engine, model: FakeModelServer
) -> None:
    """A user asking about "[[final]]" (echoed by the model) does not end the consultation,
    and the reply keeps those characters."""
    reply = await service.turns.ask(
        UserMessage(KEY, "what does [[final]] or [[FINAL]] mean in my config?")
    )

    assert reply.text == "Reply to: what does [[final]] or [[FINAL]] mean in my config?"
    assert (reply.round, reply.is_final, reply.is_complete) == (1, False, False)


async def test_a_huge_message_keeps_the_model_request_bounded(
    service: Engine, model: FakeModelServer
) -> None:
    """A 900 KB first message (repeated in the final-round prompt too) reaches the model
    as its beginning and end: the request stays near the history budget."""
    message = "START " + "Details about the setup. " * 36_000 + "END"
    model.enqueue("Here is the plan.")

    await service.sessions.start_session(message, max_rounds=1)

    body = model.requests[-1]
    contents = [m["content"] for m in body["messages"]]
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert sum(map(len, contents)) <= 24_000 + 6_000 + 4_000  # history, request quote, prompt
    assert len(json.dumps(body)) < 60_000
    assert contents[1].startswith("START Details") and contents[1].endswith("setup. END")
    assert "characters left out" in contents[0] and "characters left out" in contents[1]
    assert "> START Details" in contents[0]
