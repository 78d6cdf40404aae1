"""Collecting a final answer cut off by the token limit, over the real SDK."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest

from core.domain.consultation import Usage
from core.domain.json_answer import parse_json_answer, strip_fences
from core.domain.ports import CompletionRequest
from core.llm.collect import CollectedAnswer, collect_answer
from core.llm.collect_stream import CAPPED, OPENER_LOOKAHEAD
from core.llm.llm import OpenAICompleter
from core.llm.overlap import merge_with_overlap
from core.llm.tool_loop import ToolLimits, ToolLoop, ToolSupport
from fakes.model_server import FakeModelServer, ScriptedCall
from tests.toolboxes import CLOCK, Tools

CONTINUE = "Continue exactly where you stopped; do not repeat anything."
HISTORY = [
    {"role": "system", "content": "You are an expert."},
    {"role": "user", "content": "Plan my garden."},
]


# merge_with_overlap


def test_exact_continuation_is_appended() -> None:
    """A fragment that starts where the text stopped is appended unchanged."""
    assert merge_with_overlap("The quick brown f", "ox jumps.") == "The quick brown fox jumps."


def test_partial_overlap_is_not_repeated() -> None:
    """The longest suffix of the text that starts the fragment appears once."""
    merged = merge_with_overlap("Step 1: dig. Step 2: pla", "Step 2: plant seeds.")
    assert merged == "Step 1: dig. Step 2: plant seeds."


def test_fragment_contained_in_the_end_adds_nothing() -> None:
    """A fragment that only repeats the end of the text adds nothing."""
    text = "First paragraph.\n\nSecond paragraph ends here."
    assert merge_with_overlap(text, "Second paragraph") == text
    assert merge_with_overlap(text, "ends here.") == text


def test_no_overlap_is_plain_concatenation() -> None:
    """Without a shared seam the fragment is appended as is."""
    assert merge_with_overlap("Water daily.", " Feed weekly.") == "Water daily. Feed weekly."


def test_tiny_coincidental_overlap_is_ignored() -> None:
    """A seam shorter than min_overlap is a real repeated letter, not a repetition."""
    assert merge_with_overlap("grass", "s grow") == "grasss grow"
    assert merge_with_overlap("grass", "s grow", min_overlap=1) == "grass grow"


def test_whitespace_at_the_seam_is_ignored() -> None:
    """A repeated line is found even when the model changed the whitespace it stopped at."""
    merged = merge_with_overlap("Intro.\n\n## Watering\n", "## Watering every day")
    assert merged == "Intro.\n\n## Watering every day"


def test_multibyte_text_merges_by_character() -> None:
    """Cyrillic and emoji seams merge without splitting or repeating characters."""
    text = "Полив: утром 🌅 и вечером 🌙, по два ведра"
    assert merge_with_overlap(text, "🌙, по два ведра на куст.") == (
        "Полив: утром 🌅 и вечером 🌙, по два ведра на куст."
    )
    assert merge_with_overlap("Итог: 👍🏽 👌", "👍🏽 👌 готово") == "Итог: 👍🏽 👌 готово"


def test_empty_sides() -> None:
    """Empty text takes the fragment; an empty fragment changes nothing."""
    assert merge_with_overlap("", "abc") == "abc"
    assert merge_with_overlap("abc", "") == "abc"


def test_long_texts_merge_quickly() -> None:
    """A 20 kB answer with a repetitive tail merges through the bounded window."""
    text = "ab" * 10_000 + "Z" + "a" * 10_000
    fragment = "a" * 3_000 + "END"
    for _ in range(50):  # would take minutes if the search were quadratic over the text
        merged = merge_with_overlap(text, fragment)
    assert merged == text + "END"
    prose = "".join(f"Пункт {i}: полить грядку {i}. " for i in range(800))
    assert merge_with_overlap(prose, prose[-1_500:] + "Конец.") == prose + "Конец."


def test_strip_fences_and_repair() -> None:
    """Fenced JSON is unwrapped; broken JSON is repaired; garbage stays invalid."""
    assert strip_fences('```json\n{"a": 1}\n```') == '{"a": 1}'
    assert parse_json_answer('{"a": 1}') == ('{"a": 1}', {"a": 1}, True, False)
    text, value, valid, repaired = parse_json_answer('{"a": "щ", "b": [1, 2')
    assert (value, valid, repaired) == ({"a": "щ", "b": [1, 2]}, True, True)
    assert text == '{"a": "щ", "b": [1, 2]}'
    assert parse_json_answer("no json here")[1:] == (None, False, False)


# collect_answer


async def test_length_then_stop_is_merged(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A cut answer is continued and merged; the continuation carries the partial answer."""
    model_server.enqueue("1. Dig the beds.\n2. Plant the tom", finish_reason="length")
    model_server.enqueue("2. Plant the tomatoes.\n3. Water.", finish_reason="stop")
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    answer = await collect_answer(
        completer,
        CompletionRequest(HISTORY, "m", max_tokens=10),
        continuation_prompt=CONTINUE,
        max_continuations=3,
        on_text=on_text,
    )

    assert answer.text == "1. Dig the beds.\n2. Plant the tomatoes.\n3. Water."
    assert answer.complete is True
    assert (answer.finish_reason, answer.continuations) == ("stop", 1)
    second = model_server.requests[1]["messages"]
    assert second == [
        *HISTORY,
        {"role": "assistant", "content": "1. Dig the beds.\n2. Plant the tom"},
        {"role": "user", "content": CONTINUE},
    ]
    assert model_server.requests[1]["max_tokens"] == 10
    assert shown[-1] == answer.text
    assert all(text.count("2. Plant") <= 1 for text in shown)  # the seam is never shown twice
    assert shown[0] != answer.text  # progress was visible before the end


async def test_usage_is_summed(model_server: FakeModelServer, completer: OpenAICompleter) -> None:
    """Usage is the sum over the first call and its continuations."""
    model_server.enqueue(
        "Part one, ", "length", usage={"prompt_tokens": 10, "completion_tokens": 5}
    )
    model_server.enqueue("part two.", usage={"prompt_tokens": 20, "completion_tokens": 4})

    answer = await collect_answer(
        completer,
        CompletionRequest(HISTORY, "m"),
        continuation_prompt=CONTINUE,
        max_continuations=2,
    )

    assert answer.text == "Part one, part two."
    assert answer.usage == Usage(30, 9)


async def test_stops_at_max_continuations(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Collection stops after max_continuations and reports the answer as incomplete."""
    for part in ("Alpha one. ", "Beta two. ", "Gamma three. ", "Delta four. "):
        model_server.enqueue(part, finish_reason="length")

    answer = await collect_answer(
        completer,
        CompletionRequest(HISTORY, "m"),
        continuation_prompt=CONTINUE,
        max_continuations=2,
    )

    assert answer.text == "Alpha one. Beta two. Gamma three. "
    assert (answer.complete, answer.finish_reason, answer.continuations) == (False, "length", 2)
    assert len(model_server.requests) == 3
    assert model_server.pending == 1


async def test_stops_when_a_fragment_adds_nothing(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A continuation that only repeats the end stops the loop instead of asking again."""
    model_server.enqueue("Final advice: mulch the beds.", finish_reason="length")
    model_server.enqueue("mulch the beds.", finish_reason="length")
    model_server.enqueue("never requested")

    answer = await collect_answer(
        completer,
        CompletionRequest(HISTORY, "m"),
        continuation_prompt=CONTINUE,
        max_continuations=5,
    )

    assert answer.text == "Final advice: mulch the beds."
    assert (answer.complete, answer.continuations) == (False, 1)
    assert len(model_server.requests) == 2


async def test_json_answer_continued_then_parsed(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A JSON answer cut in the middle is continued, unfenced and parsed."""
    data = {"plan": [{"step": i, "what": f"Шаг {i}"} for i in range(1, 6)], "done": True}
    full = "```json\n" + json.dumps(data, ensure_ascii=False) + "\n```"
    cut = len(full) // 2
    model_server.enqueue(full[:cut], finish_reason="length")
    model_server.enqueue(full[cut - 12 :], finish_reason="stop")  # repeats a 12-char seam

    answer = await collect_answer(
        completer,
        CompletionRequest(HISTORY, "m", json_mode=True),
        continuation_prompt=CONTINUE,
        max_continuations=2,
    )

    assert answer.json_value == data
    assert (answer.json_valid, answer.json_repaired, answer.complete) == (True, False, True)
    assert json.loads(answer.text) == data
    assert model_server.requests[0]["response_format"] == {"type": "json_object"}
    assert "response_format" not in model_server.requests[1]  # a fragment is not an object


async def test_broken_json_is_repaired(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """JSON still broken after collection is repaired and re-serialised."""
    model_server.enqueue('{"tips": ["water", "прополка"], "score": 9', finish_reason="length")

    answer = await collect_answer(
        completer,
        CompletionRequest(HISTORY, "m", json_mode=True),
        continuation_prompt=CONTINUE,
        max_continuations=0,
    )

    assert answer.json_value == {"tips": ["water", "прополка"], "score": 9}
    assert (answer.json_valid, answer.json_repaired, answer.complete) == (True, True, False)
    assert answer.text == '{"tips": ["water", "прополка"], "score": 9}'


async def test_text_mode_has_no_json_fields(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Outside JSON mode the answer is left alone and json_valid stays None."""
    model_server.enqueue("```json\n{}\n```")

    answer = await collect_answer(
        completer,
        CompletionRequest(HISTORY, "m"),
        continuation_prompt=CONTINUE,
        max_continuations=1,
    )

    assert (answer.text, answer.json_valid, answer.json_value) == ("```json\n{}\n```", None, None)


async def test_failed_continuation_keeps_the_text(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A model error on a continuation returns what was collected, marked incomplete."""
    model_server.enqueue("Everything so far", finish_reason="length")
    model_server.enqueue("overloaded", status=503)

    answer = await collect_answer(
        completer,
        CompletionRequest(HISTORY, "m"),
        continuation_prompt=CONTINUE,
        max_continuations=3,
    )

    assert (answer.text, answer.complete, answer.continuations) == ("Everything so far", False, 0)
    assert answer.error is not None


async def test_failed_first_call_propagates(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A model error before any text arrives is raised to the caller."""
    from core.domain.errors import ModelError

    model_server.enqueue("bad request", status=400)

    with pytest.raises(ModelError):
        await collect_answer(
            completer,
            CompletionRequest(HISTORY, "m"),
            continuation_prompt=CONTINUE,
            max_continuations=3,
        )


async def test_extras_are_kept_across_calls(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Provider extras from the calls are merged into the collected answer: the first
    call's sources stay (its [n] markers refer to them)."""
    model_server.enqueue("Sources say ", "length", extras={"citations": ["a"]})
    model_server.enqueue("water often.", extras={"citations": ["a", "b"]})

    answer = await collect_answer(
        completer,
        CompletionRequest(HISTORY, "sonar"),
        continuation_prompt=CONTINUE,
        max_continuations=1,
    )

    assert answer.text == "Sources say water often."
    assert answer.extras["citations"] == ["a"]
    assert answer.model == "sonar"


async def collect(
    completer: OpenAICompleter, *, max_continuations: int = 3, **options: Any
) -> CollectedAnswer:
    return await collect_answer(
        completer,
        CompletionRequest(HISTORY, "m"),
        continuation_prompt=CONTINUE,
        max_continuations=max_continuations,
        **options,
    )


async def test_a_stream_ending_without_finish_reason_is_continued(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A final answer whose stream just ends (no finish_reason, no [DONE]) was cut off:
    it is continued like one cut by the token limit."""
    model_server.enqueue("Step one: dig the be", stop_early=True)
    model_server.enqueue("the beds. Step two: plant.")

    answer = await collect(completer)

    assert answer.text == "Step one: dig the beds. Step two: plant."
    assert (answer.complete, answer.continuations, answer.finish_reason) == (True, 1, "stop")
    assert model_server.requests[1]["messages"][-2]["content"] == "Step one: dig the be"


@pytest.mark.parametrize("stop", ["early", "length"])
async def test_a_cut_off_reply_that_is_not_final_is_not_continued(
    model_server: FakeModelServer, completer: OpenAICompleter, stop: str
) -> None:
    """A clarifying reply cut off is returned as it is, marked incomplete, with one call."""
    if stop == "early":
        model_server.enqueue("1. Which soil do you", stop_early=True)
    else:
        model_server.enqueue("1. Which soil do you", finish_reason="length")

    answer = await collect(completer, continue_if=lambda text: False)

    assert (answer.text, answer.complete, answer.continuations) == (
        "1. Which soil do you",
        False,
        0,
    )
    assert len(model_server.requests) == 1


async def test_continue_if_decides_from_the_first_reply(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """`continue_if` sees the first reply: an early final answer is continued."""
    model_server.enqueue("[[FINAL]] Plant in May, wa", finish_reason="length")
    model_server.enqueue("ter weekly.")
    seen: list[str] = []

    def is_final(text: str) -> bool:
        seen.append(text)
        return text.startswith("[[FINAL]]")

    answer = await collect(completer, continue_if=is_final)

    assert seen == ["[[FINAL]] Plant in May, wa"]
    assert answer.text == "[[FINAL]] Plant in May, water weekly."


async def test_an_endless_answer_stops_at_max_chars(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A stream that never ends is read up to max_chars, closed, and returned cut off:
    incomplete, and not continued."""
    model_server.enqueue("Grow more beans. ", endless=True, chunk_size=5)
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    answer = await asyncio.wait_for(collect(completer, max_chars=2000, on_text=on_text), 60)

    assert len(answer.text) == 2000 and answer.text.startswith("Grow more beans. Grow")
    assert (answer.complete, answer.continuations) == (False, 0)
    assert len(model_server.requests) == 1
    assert all(len(text) <= 2000 for text in shown)


async def test_max_chars_holds_without_on_text_and_across_continuations(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """The cap counts the whole merged answer, streamed to a caller or not."""
    model_server.enqueue("a" * 1500, finish_reason="length", chunk_size=100)
    model_server.enqueue("b" * 1500, chunk_size=100)

    answer = await collect(completer, max_chars=2000)

    assert answer.text == "a" * 1500 + "b" * 500
    assert (answer.complete, answer.continuations) == (False, 1)
    assert len(model_server.requests) == 2


@pytest.mark.parametrize("stopped_at", [0.0, 1000.0])
async def test_a_long_stream_is_forwarded_a_bounded_number_of_times(
    model_server: FakeModelServer, completer: OpenAICompleter, stopped_at: float
) -> None:
    """Tens of thousands of deltas do not mean as many whole-text updates: growth is
    forwarded in batches (here with a clock that never moves), and the last update is the
    whole text."""
    text = "".join(f"Water bed {i}. " for i in range(2400))  # not a loop: each line differs
    model_server.enqueue(text, chunk_size=2)
    shown: list[str] = []

    async def on_text(whole: str) -> None:
        shown.append(whole)

    answer = await collect(completer, on_text=on_text, clock=lambda: stopped_at)

    assert answer.text == text and shown[-1] == text
    assert shown[0] == "Wa"
    assert 50 < len(shown) < 500, len(shown)


async def test_growth_is_forwarded_when_the_interval_passed(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Each delta is forwarded when the forwarding interval (well under a second) has passed
    since the last one: here the clock moves a second per look."""
    text = "".join(f"Water bed {i}. " for i in range(300))  # even length, not a loop
    model_server.enqueue(text, chunk_size=2)
    ticks = iter(range(10**6))
    shown: list[str] = []

    async def on_text(whole: str) -> None:
        shown.append(whole)

    await collect(completer, on_text=on_text, clock=lambda: float(next(ticks)))

    assert len(shown) == len(text) // 2


# Seams of continuations that restart instead of continuing (recorded from real models)

CUT_MID_SENTENCE = "Week 1 builds the habit; the long run on Saturday is what it gives us"
RESTART_SEAMS = [
    pytest.param(
        CUT_MID_SENTENCE,
        "I'm happy to continue. The next step is to rest on Sunday.",
        CUT_MID_SENTENCE + " The next step is to rest on Sunday.",
        id="opener-then-new-sentence",
    ),
    pytest.param(
        "Бегайте трусцой три раза в нед",
        "Конечно, продолжаю:\n\nЕженедельно увеличивайте дистанцию на 10 %.",
        "Бегайте трусцой три раза в нед Еженедельно увеличивайте дистанцию на 10 %.",
        id="russian-opener",
    ),
    pytest.param(
        "Warm up for five minutes. Then run for ten minutes at an easy pa",
        "Sure! Here's the continuation:\n\nThen run for ten minutes at an easy pace, and walk.",
        "Warm up for five minutes. Then run for ten minutes at an easy pace, and walk.",
        id="opener-then-restated-sentence",
    ),
    pytest.param(
        "Warm up for five minutes. Then run for ten minutes at an easy pa",
        "ce, and walk back home.",
        "Warm up for five minutes. Then run for ten minutes at an easy pace, and walk back home.",
        id="mid-word-continuation-glued",
    ),
    pytest.param(
        "Then keep the pace. Continuing from where I left off",
        "Continuing from where I left off: stretch for five minutes.",
        "Then keep the pace. Continuing from where I left off: stretch for five minutes.",
        id="overlap-wins-over-opener",
    ),
    pytest.param(
        CUT_MID_SENTENCE,
        "Continuing from where I left off:\n\n## Week 2\n- Run 25 minutes",
        CUT_MID_SENTENCE + "\n\n## Week 2\n- Run 25 minutes",
        id="opener-then-heading",
    ),
    pytest.param(
        "Your plan is ready.",
        "Of course! Week 2 adds a fourth run.",
        "Your plan is ready. Week 2 adds a fourth run.",
        id="interjection-alone",
    ),
]


@pytest.mark.parametrize(("text", "fragment", "merged"), RESTART_SEAMS)
def test_a_restarted_continuation_is_joined_on_a_boundary(
    text: str, fragment: str, merged: str
) -> None:
    """A restart's opening phrase is dropped and a new sentence or block is not glued to a
    word; a continuation mid-word is still glued as it is."""
    assert merge_with_overlap(text, fragment) == merged


@pytest.mark.parametrize(
    "fragment",
    [
        "Sure footing matters on trails.",
        "Certainly, the best time is the morning.",
        "Continuing runs build endurance.",
        "Here is the rest day schedule.",
        "Продолжение тренировок важно.",
    ],
)
def test_real_content_that_looks_like_an_opener_is_kept(fragment: str) -> None:
    """Words that open real sentences are never dropped."""
    assert merge_with_overlap("Done.", fragment) == "Done. " + fragment


def test_a_lowercase_or_punctuation_start_is_glued() -> None:
    """A fragment starting in lowercase, with punctuation or with whitespace is appended
    as it is (it continues the word or sentence)."""
    assert merge_with_overlap("in New Yo", "rk City.") == "in New York City."
    assert merge_with_overlap("the NA", "SA launch") == "the NASA launch"
    assert merge_with_overlap("stop", ", then go.") == "stop, then go."
    assert merge_with_overlap("stop.", "\nNext line") == "stop.\nNext line"


def test_a_fragment_that_is_only_an_opener_adds_nothing() -> None:
    """A continuation saying only "Sure! Here's the rest:" adds nothing to the answer."""
    assert merge_with_overlap("Done", "Sure! Here's the rest:") == "Done"
    assert merge_with_overlap("Готово", "Конечно, продолжаю:\n") == "Готово"


async def test_an_opener_is_never_shown_while_streaming(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """The progress of a continuation that restarts with an opener never shows the opener
    glued to the text; the final text joins on a boundary."""
    model_server.enqueue(CUT_MID_SENTENCE, finish_reason="length")
    model_server.enqueue("I'm happy to continue. The next step is to rest on Sunday.", chunk_size=3)
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    answer = await collect(completer, on_text=on_text, clock=lambda: 0.0)

    assert answer.text == CUT_MID_SENTENCE + " The next step is to rest on Sunday."
    assert not any("happy" in text for text in shown)


async def test_the_continuation_request_quotes_the_end_of_the_answer(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Each continuation prompt carries the last characters of the answer so far."""
    from core.prompting.prompts import CONTINUATION_TAIL_CHARS, PromptLibrary

    library = PromptLibrary()
    first = "".join(f"Step {i}: jog {i} minutes. " for i in range(60))
    model_server.enqueue(first, finish_reason="length")
    model_server.enqueue("Step 60: rest.")

    answer = await collect_answer(
        completer,
        CompletionRequest(HISTORY, "m"),
        continuation_prompt=library.continuation,
        max_continuations=1,
    )

    assert answer.text == first + "Step 60: rest."
    prompt = model_server.requests[1]["messages"][-1]["content"]
    assert prompt == library.continuation(first)
    assert first[-CONTINUATION_TAIL_CHARS:] in prompt
    assert first[: -CONTINUATION_TAIL_CHARS - 1] not in prompt


async def test_the_first_calls_sources_are_kept(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """The answer's [n] markers were written against the first call's sources: a
    continuation's own lists do not replace them; a list the first call lacked is taken."""
    model_server.enqueue(
        "Run easy [1] ", "length", extras={"citations": ["a", "b"], "search_results": []}
    )
    model_server.enqueue(
        "and rest [2].",
        extras={"citations": ["x"], "search_results": [{"url": "https://y"}]},
    )

    answer = await collect(completer)

    assert answer.text == "Run easy [1] and rest [2]."
    assert answer.extras["citations"] == ["a", "b"]
    assert answer.extras["search_results"] == [{"url": "https://y"}]


# Progress of a continuation, and the cap closing one. Every text handed to `on_text` is
# a prefix of the final answer (a repeated seam or a restart is never shown), and progress
# of a continuation is shown while it streams.

SEAM = (
    "On Tuesday water the tomato beds slowly at the roots, never on the leaves, and check "
    "the soil two fingers deep before you do."
)  # 120 characters the continuation repeats
FIRST = "Monday: weed the paths and loosen the soil. " + SEAM
NEW = "".join(f" Day {day}: mulch bed {day} and note what grew." for day in range(3, 9))


async def collect_ticking(
    completer: OpenAICompleter, shown: list[str], *, max_chars: int = 50_000
) -> CollectedAnswer:
    """One answer with a clock that moves a second per look, so every delta is forwarded."""
    ticks = itertools.count()

    async def on_text(text: str) -> None:
        shown.append(text)

    return await collect(
        completer, on_text=on_text, max_chars=max_chars, clock=lambda: float(next(ticks))
    )


async def test_a_continuation_repeating_a_long_seam_shows_only_prefixes_of_the_answer(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A continuation that restates the last 120 characters (after a line break) and goes
    on: its progress is shown while it streams, never with the seam twice or without the
    text before it."""
    model_server.enqueue(FIRST, finish_reason="length")
    model_server.enqueue("\n" + SEAM + NEW, chunk_size=5)
    shown: list[str] = []

    answer = await collect_ticking(completer, shown)

    assert answer.text == FIRST + NEW
    assert (answer.complete, answer.continuations) == (True, 1)
    assert all(answer.text.startswith(text) for text in shown), [
        text[len(FIRST) - 20 :] for text in shown if not answer.text.startswith(text)
    ]
    during = [text for text in shown if len(FIRST) < len(text) < len(answer.text)]
    assert len(during) > 10  # the new part appeared piece by piece


async def test_a_continuation_is_shown_once_the_lookahead_has_arrived(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A continuation's first characters are held back only until `OPENER_LOOKAHEAD` of
    them arrived (enough to recognise a restart's opening phrase), then shown at once."""
    more = ("and then rake the leaves into the compost heap behind the shed, " * 3)[
        : 2 * OPENER_LOOKAHEAD
    ]
    model_server.enqueue("Monday: weed the paths, ", finish_reason="length")
    model_server.enqueue(more, chunk_size=OPENER_LOOKAHEAD)
    shown: list[str] = []

    answer = await collect_ticking(completer, shown)

    assert answer.text == "Monday: weed the paths, " + more
    assert "Monday: weed the paths, " + more[:OPENER_LOOKAHEAD] in shown


async def test_the_cap_closes_a_continuation_within_its_lookahead(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """The cap counts what a continuation streams, its repeated seam included: the stream
    is closed once it sent `max_chars` less the answer so far, and what arrived is merged."""
    seam = SEAM[-20:]
    model_server.enqueue(FIRST, finish_reason="length")
    model_server.enqueue(seam + NEW, chunk_size=5)
    shown: list[str] = []

    answer = await collect_ticking(completer, shown, max_chars=len(FIRST) + 30)

    assert answer.text == FIRST + NEW[:10]
    assert (answer.complete, answer.finish_reason, answer.continuations) == (False, CAPPED, 1)
    assert shown[-1] == answer.text


async def test_a_continuation_ending_exactly_at_the_cap_is_complete(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Reaching `max_chars` exactly with the model's own stop is a complete answer."""
    model_server.enqueue("Monday: weed the paths ", finish_reason="length")
    model_server.enqueue("and water.", chunk_size=5)
    shown: list[str] = []

    answer = await collect_ticking(
        completer, shown, max_chars=len("Monday: weed the paths and water.")
    )

    assert answer.text == "Monday: weed the paths and water."
    assert (answer.complete, answer.finish_reason) == (True, "stop")


def test_a_seam_as_long_as_the_minimum_is_merged() -> None:
    """A text exactly `min_overlap` long that the fragment restates is not repeated."""
    assert merge_with_overlap("Dig.", "Dig. Then plant.") == "Dig. Then plant."


def test_a_fragment_shorter_than_the_minimum_is_appended_whole() -> None:
    """A continuation of a few characters is never trimmed."""
    assert merge_with_overlap("Keep wat", "er.") == "Keep water."


def test_a_single_quoted_empty_string_is_repaired_to_json() -> None:
    """'' (not JSON) is repaired to the empty JSON string, not rejected."""
    assert parse_json_answer("''") == ('""', "", True, True)


def test_a_fragment_of_the_minimum_length_repeated_earlier_adds_nothing() -> None:
    """A fragment exactly `min_overlap` long that occurs near the end adds nothing."""
    assert merge_with_overlap("Water the beds, then mulch", "beds") == "Water the beds, then mulch"


def test_a_fragment_opening_with_a_line_break_still_merges_its_seam() -> None:
    """Whitespace before a restated seam does not hide the seam."""
    merged = merge_with_overlap("Step 1: dig the beds", "\nthe beds, then plant.")
    assert merged == "Step 1: dig the beds, then plant."


def _chunk(content: str, finish_reason: str | None, model: str) -> bytes:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": finish_reason}
    return f"data: {json.dumps({'model': model, 'choices': [choice]})}\n\n".encode()


async def test_the_answer_names_the_model_version_that_wrote_it_last(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Providers answer with the exact model version: the answer carries the one the last
    call reported, not the alias that was asked for."""
    model_server.enqueue(raw_events=[_chunk("Plant in May, wa", "length", "m-0513")])
    model_server.enqueue(raw_events=[_chunk("ter weekly.", "stop", "m-0514")])

    answer = await collect(completer)

    assert (answer.text, answer.model) == ("Plant in May, water weekly.", "m-0514")


async def test_a_single_answer_names_its_model_version(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """One call's reported model version is the answer's model."""
    model_server.enqueue(raw_events=[_chunk("Plant in May.", "stop", "m-0513")])

    answer = await collect(completer)

    assert answer.model == "m-0513"


async def test_the_default_cap_is_fifty_thousand_characters(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Without `max_chars` an answer is cut at 50,000 characters."""
    text = "".join(f"Water bed {i} at dawn. " for i in range(3000))  # 65 kB, not a loop
    model_server.enqueue(text, chunk_size=1000)

    answer = await collect(completer)

    assert (answer.text, answer.model) == (text[:50_000], "m")
    assert (answer.complete, answer.finish_reason) == (False, CAPPED)


async def test_a_first_reply_exactly_at_the_cap_is_complete(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A reply that ends by itself exactly at `max_chars` is complete, not cut."""
    model_server.enqueue("Plant in May and water weekly.", chunk_size=5)

    answer = await collect(completer, max_chars=len("Plant in May and water weekly."))

    assert (answer.text, answer.complete, answer.finish_reason) == (
        "Plant in May and water weekly.",
        True,
        "stop",
    )


async def test_the_last_view_of_a_capped_reply_is_the_answer(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A reply stopped at `max_chars` between two deltas (pieces held back for batching)
    still ends the caller's view on the whole answer."""
    text = "".join(f"Water bed {i} at dawn. " for i in range(200))
    model_server.enqueue(text, chunk_size=10)
    shown: list[str] = []

    async def on_text(whole: str) -> None:
        shown.append(whole)

    answer = await collect(completer, max_chars=2000, on_text=on_text, clock=lambda: 0.0)

    assert answer.text == text[:2000] and shown[-1] == answer.text


async def test_a_loop_is_cut_without_a_caller_watching(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A looping first reply is cut to one occurrence also when nobody streams it."""
    paragraph = "".join(f"Run {i} minutes on day {i}, then walk home slowly. " for i in range(6))
    model_server.enqueue(paragraph, endless=True, chunk_size=7)

    answer = await asyncio.wait_for(collect(completer), 30)

    assert (answer.text, answer.model) == (paragraph, "m")
    assert (answer.complete, answer.finish_reason) == (False, "repetition")


async def test_a_text_continuation_opening_a_code_block_keeps_its_fence(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """Outside JSON mode a continuation starting with ``` is content (a code block)."""
    model_server.enqueue("Save this script:", finish_reason="length")
    model_server.enqueue("```python\nprint('water')\n```")

    answer = await collect(completer)

    assert answer.text == "Save this script:\n\n```python\nprint('water')\n```"


@pytest.mark.parametrize("before", ["", "\n"])
async def test_a_json_continuation_restating_the_fence_is_parsed_cleanly(
    model_server: FakeModelServer, completer: OpenAICompleter, before: str
) -> None:
    """A JSON continuation that opens the code fence again (after a line break or not)
    loses that fence: the merged answer is valid JSON without repair."""
    model_server.enqueue('```json\n{"plan": [1, 2, ', finish_reason="length")
    model_server.enqueue(before + "```json\n3]}\n```")

    answer = await collect_answer(
        completer,
        CompletionRequest(HISTORY, "m", json_mode=True),
        continuation_prompt=CONTINUE,
        max_continuations=1,
    )

    assert (answer.json_value, answer.json_valid, answer.json_repaired) == (
        {"plan": [1, 2, 3]},
        True,
        False,
    )


async def test_growth_by_a_32nd_of_the_text_is_forwarded_at_once(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """With a stopped clock, a delta is forwarded when what is pending reaches 1/32 of the
    text: each of the first 32 characters, then every second one."""
    text = "".join(f"Water bed {i}. " for i in range(10))
    model_server.enqueue(text, chunk_size=1)
    shown: list[str] = []

    async def on_text(whole: str) -> None:
        shown.append(whole)

    await collect(completer, on_text=on_text, clock=lambda: 0.0)

    assert [len(whole) for whole in shown[:34]] == [*range(1, 33), 34, 36]


async def test_the_last_view_of_a_reply_capped_mid_delta_is_the_answer(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A reply capped inside a delta, with characters held back for batching, ends the
    caller's view on the whole (cut) answer."""
    head = "Water the tomato beds at dawn. " * 3 + "Mulch them."  # 101 characters
    deltas = [head, "Dig", "ging twice a week helps."]
    model_server.enqueue(raw_events=[_chunk(delta, None, "m") for delta in deltas])
    shown: list[str] = []

    async def on_text(whole: str) -> None:
        shown.append(whole)

    answer = await collect(completer, max_chars=len(head) + 6, on_text=on_text, clock=lambda: 0.0)

    assert answer.text == head + "Diggin"
    assert shown == [head, answer.text]


async def test_an_empty_reply_shows_nothing(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A reply without text hands the caller no (empty) view to show."""
    model_server.enqueue("")
    shown: list[str] = []

    async def on_text(whole: str) -> None:
        shown.append(whole)

    answer = await collect(completer, on_text=on_text)

    assert (answer.text, shown) == ("", [])


async def test_a_capped_answer_is_charged_what_it_cost(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """A stream closed at the cap never reached its usage chunk: the tokens it took are
    estimated (and marked so), never counted as none."""
    text = "".join(f"Water bed {i} at dawn. " for i in range(200))
    model_server.enqueue(text, chunk_size=10)

    answer = await collect(completer, max_chars=2000)

    assert answer.finish_reason == CAPPED
    assert answer.usage.estimated and answer.usage.prompt_tokens > 0
    assert answer.usage.completion_tokens >= 2000 // 4


async def test_a_capped_answer_after_tool_calls_is_charged_for_them_too(
    model_server: FakeModelServer, completer: OpenAICompleter
) -> None:
    """The tool-calling call before a capped answer is charged with it."""
    model_server.enqueue_calls(
        ScriptedCall(CLOCK.name, '{"tz": "UTC"}'),
        usage={"prompt_tokens": 700, "completion_tokens": 30},
    )
    model_server.enqueue("".join(f"Water bed {i} at dawn. " for i in range(200)), chunk_size=10)
    loop = ToolLoop(
        completer, Tools(), limits=ToolLimits(), support=ToolSupport(), answer_now="Answer now."
    )

    answer = await collect_answer(
        loop,
        CompletionRequest(HISTORY, "m", tools=(CLOCK,)),
        continuation_prompt=CONTINUE,
        max_continuations=0,
        max_chars=2000,
    )

    assert answer.finish_reason == CAPPED
    assert answer.usage.prompt_tokens > 700 and answer.usage.completion_tokens >= 30 + 2000 // 4
