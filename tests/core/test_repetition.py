"""A model stuck in a loop is stopped; an answer that repeats rows or items on purpose is not.

Unit tests of `core.llm.repetition`, then the loop met in a real stream (the fake model
server's endless mode repeats one text forever, as a looping model does) through the
real openai SDK, `collect_answer` and the service."""

from __future__ import annotations

import asyncio

import pytest

from core.domain.asking import UserMessage
from core.domain.outcomes import Notice
from core.domain.ports import CompletionRequest, OnText
from core.llm.collect import CollectedAnswer, collect_answer
from core.llm.llm import OpenAICompleter
from core.llm.repetition import CHECK_EVERY, RepetitionGuard, find_loop
from core.turns.engine import Engine
from fakes.model_server import FakeModelServer

PARAGRAPH = (
    "To build endurance safely, alternate one minute of easy running with two minutes of "
    "brisk walking, and repeat the cycle eight times. Keep the pace conversational, and stop "
    "at once if you feel pain in your joints. "
)  # 216 characters
INTRO = "## Your 5K plan\n\nHere is how to start.\n\n"


def test_a_paragraph_repeated_three_times_is_a_loop() -> None:
    """A unit of 200+ characters three times back to back at the end: cut to the first."""
    text = INTRO + PARAGRAPH * 3
    assert find_loop(text) == 2 * len(PARAGRAPH)
    assert find_loop(INTRO + PARAGRAPH * 7) == 6 * len(PARAGRAPH)


def test_a_paragraph_twice_is_not_a_loop() -> None:
    """Two occurrences may be a restated summary; only the third makes it a loop."""
    assert find_loop(INTRO + PARAGRAPH * 2) is None


def test_a_loop_starting_mid_unit_keeps_exactly_one_occurrence() -> None:
    """The loop need not start where the unit does: what is kept is the text before it and
    one whole occurrence."""
    looping = "I will help you with that. "
    text = "Sure!" + looping * 100
    cut = find_loop(text)
    assert cut is not None
    assert text[: len(text) - cut] in ("Sure!" + looping, "Sure!" + looping.rstrip())
    kept = text[: len(text) - cut]
    assert kept.count("I will help you") == 1


def test_a_short_line_repeated_many_times_is_a_loop() -> None:
    """A short line over 1,600 characters of repetition is a loop."""
    line = "- Drink water.\n"
    text = INTRO + line * 120
    cut = find_loop(text)
    assert cut is not None
    assert text[: len(text) - cut].rstrip() == (INTRO + line).rstrip()


@pytest.mark.parametrize(
    "answer",
    [
        # A template table with identical empty rows to fill in.
        "| Week | Mon | Wed | Fri |\n|---|---|---|---|\n" + "|      |     |     |     |\n" * 30,
        # A checklist with repeated items.
        "Checklist:\n" + "- [ ] Stretch for 5 minutes\n" * 20,
        # Numbered rows that look alike but are not identical.
        "".join(f"| {week} | Run 20 min | Walk 10 min | Rest |\n" for week in range(1, 200)),
        # A separator line and a long row of dashes.
        "Intro\n\n" + "=" * 120 + "\n\n" + "-" * 800 + "\nEnd",
        # A summary restating a paragraph once.
        INTRO + PARAGRAPH + "\n\nIn short: " + PARAGRAPH,
    ],
    ids=["empty-rows", "checklist", "numbered-rows", "separators", "restated"],
)
def test_real_answers_that_repeat_are_not_loops(answer: str) -> None:
    """Repeated table rows, list items, separators and a restatement are real answers."""
    assert find_loop(answer) is None
    guard = RepetitionGuard()
    assert all(guard.add(answer[i : i + 4]) is None for i in range(0, len(answer), 4))


def test_the_guard_reports_a_loop_across_the_seam_within_one_interval() -> None:
    """A loop that started in the text a continuation continues is reported within one
    check interval of the stream, and the cut keeps one occurrence."""
    before = INTRO + PARAGRAPH * 2
    guard = RepetitionGuard(before=before)
    stream = PARAGRAPH * 10
    fed, cut = "", None
    while cut is None and len(fed) < len(stream):
        piece = stream[len(fed) : len(fed) + 8]
        fed += piece
        cut = guard.add(piece)
    assert cut is not None and len(fed) <= CHECK_EVERY + 8
    text = before + fed
    assert text[: len(text) - cut] == INTRO + PARAGRAPH


def test_a_look_is_bounded_on_huge_text() -> None:
    """Only the last characters are looked at: a 2 MB text that repeats short pieces
    everywhere is judged quickly (this would take minutes if a look scanned it all)."""
    text = "ab" * 1_000_000 + "c"
    for _ in range(200):
        assert find_loop(text) is None


async def collect(completer: OpenAICompleter, on_text: OnText | None = None) -> CollectedAnswer:
    request = CompletionRequest([{"role": "user", "content": "Plan my running"}], "m")
    return await asyncio.wait_for(
        collect_answer(
            completer,
            request,
            continuation_prompt="Continue.",
            max_continuations=3,
            on_text=on_text,
        ),
        30,
    )


async def test_a_looping_stream_is_stopped_cut_and_not_continued(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A model repeating one paragraph forever: the stream is closed, the answer keeps one
    occurrence, is incomplete and is not continued; the caller's last view is that text."""
    model_server.enqueue(PARAGRAPH, endless=True, chunk_size=7)
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    answer = await collect(completer, on_text)

    assert answer.text == PARAGRAPH
    assert (answer.complete, answer.continuations, answer.finish_reason) == (
        False,
        0,
        "repetition",
    )
    assert len(model_server.requests) == 1
    assert shown[-1] == PARAGRAPH


async def test_a_looping_continuation_is_cut_too(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A continuation that falls into a loop ends the answer there, with one occurrence."""
    model_server.enqueue("Week 1: start slowly. ", finish_reason="length")
    model_server.enqueue(PARAGRAPH, endless=True, chunk_size=7)

    answer = await collect(completer)

    assert answer.text.rstrip() == "Week 1: start slowly. " + PARAGRAPH.rstrip()
    assert (answer.complete, answer.continuations) == (False, 1)
    assert len(model_server.requests) == 2


async def test_the_service_marks_a_looping_answer_incomplete(
    service: Engine, model_server: FakeModelServer
) -> None:
    """End to end: a looping final answer is stored cut and marked incomplete."""
    await service.settings.set_max_rounds("tg:1", 1)
    model_server.enqueue(INTRO + PARAGRAPH, endless=True, chunk_size=16)

    reply = await asyncio.wait_for(service.turns.ask(UserMessage("tg:1", "Plan my running")), 30)

    assert reply.text.startswith(INTRO + PARAGRAPH)
    assert reply.text.count(PARAGRAPH) == 1 and len(reply.text) < 2 * len(INTRO + PARAGRAPH)
    assert Notice.ANSWER_INCOMPLETE in reply.notices and reply.is_complete
    assert len(model_server.requests) == 1
