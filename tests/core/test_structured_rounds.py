"""Clarifying rounds asked as structured replies, through the real openai SDK and the fake
model server: the request, the round read, the model deciding it knows enough, and every
way an endpoint can fail to give one (refusing it, prose, broken or cut-off JSON)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from core.domain.asking import RoundRef, UserMessage
from core.domain.clarifying import (
    ROUND_SCHEMA,
    SCHEMA_NAME,
    Answer,
    ClarifyingRound,
    Question,
    answers_read,
    answers_text,
    chosen_option,
)
from core.domain.consultation import Role
from core.domain.errors import AnswerInvalid, AnswerStale, ModelError, ModelErrorKind
from core.prompting.clarifying_call import MAX_ROUND_CHARS
from core.prompting.clarifying_stream import RoundStream
from core.turns.engine import Engine
from fakes.model_server import FakeModelServer, response_format_of
from storage.sqlite.store import SqliteStore
from tests.service_harness import MakeEngine

KEY = "tg:1"
REFUSAL = (
    "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."
)


def round_json(
    preamble: str = "Got it.",
    questions: list[tuple[str, list[str]]] | None = None,
    ready: bool = False,
) -> str:
    asked = questions if questions is not None else [("What is your budget?", ["< 500", "500+"])]
    return json.dumps(
        {
            "preamble": preamble,
            "questions": [{"text": text, "options": options} for text, options in asked],
            "ready_for_final": ready,
        }
    )


def system_of(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


def format_of(body: dict[str, Any]) -> dict[str, Any] | None:
    return body.get("response_format")


@pytest.fixture
def structured(engine: MakeEngine) -> Engine:
    return engine(structured_questions="auto")


async def test_a_question_round_asks_for_a_strict_clarifying_round_and_reads_it(
    structured: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """Round 1 sends the clarifying_round schema (strict) with the structured prompt; the
    reply's questions and options come back, shown as text, and are stored with it."""
    model.enqueue(
        round_json(
            "I need two facts.",
            [("What is your budget?", ["< 500", "500–1000"]), ("Which city?", [])],
        )
    )
    reply = await structured.turns.ask(UserMessage(KEY, "Which laptop should I buy?"))

    sent = model.requests[0]
    assert format_of(sent) == {
        "type": "json_schema",
        "json_schema": {
            "name": SCHEMA_NAME,
            "schema": format_of(sent)["json_schema"]["schema"],  # type: ignore[index]
            "strict": True,
        },
    }
    assert "ready_for_final" in system_of(sent) and "[[FINAL]]" not in system_of(sent)
    assert reply.questions == ClarifyingRound(
        "I need two facts.",
        (Question("What is your budget?", ("< 500", "500–1000")), Question("Which city?")),
    )
    assert reply.text == "I need two facts.\n\n1. What is your budget?\n2. Which city?"
    assert not reply.is_final and reply.round == 1 and not reply.model_ready
    stored = await store.load_active(KEY)
    assert stored is not None
    assert stored.messages[-1].text == reply.text
    assert stored.messages[-1].questions == reply.questions


async def test_the_round_asked_last_is_read_back_through_the_history(
    structured: Engine, model: FakeModelServer
) -> None:
    """An edge starting again mid-consultation (the terminal) reads the round its options
    answer from the engine: the active consultation's last round, none once it is reset,
    none for another chat."""
    model.enqueue(round_json("One fact.", [("Which city?", ["Oslo", "Bergen"])]))
    reply = await structured.turns.ask(UserMessage(KEY, "Where should I live?"))

    assert reply.questions is not None
    assert await structured.history.round_asked(KEY) == reply.questions
    assert await structured.history.round_asked("tg:2") is None
    await structured.lifecycle.reset(KEY)
    assert await structured.history.round_asked(KEY) is None


async def test_ready_for_final_goes_on_to_the_final_answer_in_the_same_turn(
    structured: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """A round saying it is ready is not shown: the same turn asks for the final answer
    with the "you decided" prompt, and that answer completes the consultation."""
    model.enqueue(
        round_json("", [], ready=True),
        usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    )
    model.enqueue(
        "## The answer", usage={"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}
    )
    reply = await structured.turns.ask(UserMessage(KEY, "Is 2+2 four?"))

    assert len(model.requests) == 2
    final = model.requests[1]
    assert format_of(final) is None
    assert "You have decided that you know enough" in system_of(final)
    assert "What I took into account" in system_of(final)
    assert reply.text == "## The answer"
    assert reply.is_final and reply.is_complete and reply.early_finish and reply.model_ready
    assert reply.questions is None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (30, 12)
    assert await store.load_active(KEY) is None


async def test_a_refusal_of_response_format_asks_the_round_in_text_and_is_remembered(
    structured: Engine,
    model: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 400 naming response_format for both forms (json_schema, then json_object with the
    schema): the round is asked again in today's text form (with the early-finish marker),
    and every later round of the process goes straight to text, logged once at WARNING."""
    model.enqueue(REFUSAL, status=400)
    model.enqueue(REFUSAL, status=400)
    model.enqueue("What is your budget?")
    with caplog.at_level(logging.WARNING, logger="core.domain.llm_format"):
        reply = await structured.turns.ask(UserMessage(KEY, "Which laptop?"))
        await structured.turns.ask(UserMessage("tg:2", "Which phone?"))

    assert reply.text == "What is your budget?" and reply.questions is None
    assert [response_format_of(body) for body in model.requests] == [
        SCHEMA_NAME,
        "json_object",
        None,
        None,
    ]
    assert "[[FINAL]]" in system_of(model.requests[2])
    warnings = [r for r in caplog.records if "in text from now on" in r.getMessage()]
    assert len(warnings) == 1 and "refuses response_format" in warnings[0].getMessage()


async def test_prose_instead_of_json_is_the_round_and_later_rounds_are_asked_in_text(
    structured: Engine, model: FakeModelServer
) -> None:
    """A server that ignores response_format and answers prose: the prose is the round,
    shown as it streams (one call, not asked again), and the endpoint is asked in text
    from then on (with the early-finish marker); no JSON is ever shown."""
    model.enqueue("Sure! What is your budget?", chunk_size=4)
    model.enqueue("Which screen size?")
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    reply = await structured.turns.ask(UserMessage(KEY, "Which laptop?", on_text=on_text))
    second = await structured.turns.ask(UserMessage(KEY, "About 800"))

    assert reply.text == "Sure! What is your budget?" and reply.questions is None
    assert shown[0] == "Sure" and shown[-1] == "Sure! What is your budget?"
    assert second.text == "Which screen size?"
    assert [format_of(body) is not None for body in model.requests] == [True, False]
    assert "[[FINAL]]" in system_of(model.requests[1])


async def test_json_that_is_no_round_is_asked_again_in_text_without_marking_the_endpoint(
    structured: Engine, model: FakeModelServer
) -> None:
    """JSON of another shape is asked again in text once, but the next round is asked for
    a structured reply again (the endpoint can give JSON)."""
    model.enqueue('{"answer": "hello"}')
    model.enqueue("What is your budget?")
    model.enqueue(round_json())
    await structured.turns.ask(UserMessage(KEY, "Which laptop?"))
    reply = await structured.turns.ask(UserMessage(KEY, "A fast one"))

    assert [format_of(body) is not None for body in model.requests] == [True, False, True]
    assert reply.questions is not None


async def test_broken_json_is_repaired_and_json_cut_by_the_token_limit_keeps_whole_questions(
    structured: Engine, model: FakeModelServer
) -> None:
    """A missing closing brace is repaired; a reply cut off mid-question shows only the
    questions that arrived whole."""
    model.enqueue(round_json()[:-1])
    whole = round_json("Two facts.", [("Budget?", ["Low", "High"]), ("Screen size in inches?", [])])
    model.enqueue(whole[: whole.index("Screen size") + 6], finish_reason="length")
    repaired = await structured.turns.ask(UserMessage(KEY, "Which laptop?"))
    cut = await structured.turns.ask(UserMessage("tg:2", "Which laptop?"))

    assert repaired.questions is not None and repaired.questions.questions[0].options == (
        "< 500",
        "500+",
    )
    assert cut.questions == ClarifyingRound("Two facts.", (Question("Budget?", ("Low", "High")),))
    assert cut.text == "Two facts.\n\nBudget?"
    assert not cut.truncated  # the questions shown are whole


async def test_under_on_a_refusal_is_a_configuration_error_and_the_message_stays(
    engine: MakeEngine, model: FakeModelServer, store: SqliteStore
) -> None:
    """LLM_STRUCTURED_QUESTIONS=on with a server refusing the schema: MISCONFIGURED, no
    text round asked, the message kept as the open turn."""
    service = engine(structured_questions="on")
    model.enqueue(REFUSAL, status=400)
    model.enqueue(REFUSAL, status=400)
    with pytest.raises(ModelError) as info:
        await service.turns.ask(UserMessage(KEY, "Which laptop?"))

    assert info.value.kind is ModelErrorKind.MISCONFIGURED
    assert "LLM_STRUCTURED_QUESTIONS" in info.value.detail
    assert [response_format_of(body) for body in model.requests] == [SCHEMA_NAME, "json_object"]
    stored = await store.load_active(KEY)
    assert stored is not None and [m.role for m in stored.messages] == [Role.USER]


async def test_off_never_sends_response_format(engine: MakeEngine, model: FakeModelServer) -> None:
    """LLM_STRUCTURED_QUESTIONS=off asks every round in text, as before."""
    service = engine(structured_questions="off")
    await service.turns.ask(UserMessage(KEY, "Which laptop?"))

    assert format_of(model.requests[0]) is None
    assert "[[FINAL]]" in system_of(model.requests[0])


async def test_the_stream_shows_the_preamble_and_questions_never_json(
    structured: Engine, model: FakeModelServer
) -> None:
    """While the round streams in small pieces, what is shown grows as text and never
    holds a brace or a field name."""
    model.enqueue(
        round_json("Let me understand your needs first.", [("Budget?", ["Low"]), ("City?", [])]),
        chunk_size=3,
    )
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    reply = await structured.turns.ask(UserMessage(KEY, "Which laptop?", on_text=on_text))

    assert shown and shown[-1] == reply.text
    assert all("{" not in text and "preamble" not in text for text in shown)
    assert any(text.startswith("Let me") and "City?" not in text for text in shown)


async def test_an_endless_structured_reply_is_cut_and_costs_bounded_work(
    structured: Engine, model: FakeModelServer
) -> None:
    """A server streaming a preamble that never ends (4-character pieces) is cut at the
    round's character cap; what is shown is text, and the turn ends."""
    model.enqueue('{"preamble": "' + "word " * 50_000, chunk_size=4)
    reply = await structured.turns.ask(UserMessage(KEY, "Which laptop?"))

    assert len(reply.text) <= MAX_ROUND_CHARS
    assert "{" not in reply.text


async def test_answers_become_question_answer_pairs_that_the_final_round_sees(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """Options chosen and a typed answer are stored as `n. question — answer` lines, and the
    final round's request carries them."""
    service = engine(structured_questions="auto", default_max_rounds=2)
    model.enqueue(round_json("Two facts.", [("Budget?", ["Low", "High"]), ("City?", [])]))
    model.enqueue("## Final")
    first = await service.turns.ask(UserMessage(KEY, "Which laptop?"))
    final = await service.turns.ask(
        UserMessage(
            KEY,
            "I travel a lot",
            answers=[Answer(1, option=2), Answer(2, text="Berlin")],
            ref=RoundRef(first.consultation_id, first.round),
        )
    )

    assert final.is_final
    last_user = model.requests[-1]["messages"][-1]
    assert last_user == {
        "role": "user",
        "content": "1. Budget? — High\n2. City? — Berlin\nI travel a lot",
    }


async def test_picks_toggle_and_go_with_the_next_typed_message_once(
    structured: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """Picks are kept per round (one option per question, a second press unchooses), go
    with the next typed message, and are not used again after it."""
    model.enqueue(
        round_json("Two facts.", [("Budget?", ["Low", "High"]), ("City?", ["Berlin", "Rome"])])
    )
    first = await structured.turns.ask(UserMessage(KEY, "Which laptop?"))
    ref = RoundRef(first.consultation_id.replace("-", ""), first.round)
    await structured.turns.pick(KEY, ref, 1, 1, by="Ann")
    await structured.turns.pick(KEY, ref, 2, 2, by="Bob")
    await structured.turns.pick(KEY, ref, 1, 2, by="Ann")  # another option of question 1
    _, picks = await structured.turns.pick(KEY, ref, 2, 2, by="Bob")  # unchosen again
    assert [(a.question, a.option) for a in picks.answers] == [(1, 2)]

    model.enqueue(round_json("One more.", [("Screen?", [])]))
    await structured.turns.ask(UserMessage(KEY, "and light", author="Ann"))
    assert model.requests[-1]["messages"][-1]["content"] == "1. Budget? — High\nand light"
    stored = await store.load_active(KEY)
    assert stored is not None and stored.picks is None


async def test_stale_foreign_and_invalid_presses_change_nothing(
    structured: Engine, model: FakeModelServer, store: SqliteStore
) -> None:
    """A press naming another consultation, an older round or a missing option is refused
    and stores nothing."""
    model.enqueue(round_json())
    first = await structured.turns.ask(UserMessage(KEY, "Which laptop?"))
    model.enqueue(round_json("Next.", [("City?", ["Rome"])]))
    await structured.turns.ask(UserMessage(KEY, "Cheap"))
    before = await store.load_active(KEY)

    with pytest.raises(AnswerStale):
        await structured.turns.pick(KEY, RoundRef(first.consultation_id, first.round), 1, 1)
    with pytest.raises(AnswerStale):
        await structured.turns.pick(KEY, RoundRef("0" * 32, 2), 1, 1)
    with pytest.raises(AnswerInvalid):
        await structured.turns.pick(KEY, RoundRef(first.consultation_id, 2), 1, 9)
    with pytest.raises(AnswerStale):
        await structured.turns.ask(
            UserMessage(KEY, "", answers=[Answer(1, 1)], ref=RoundRef(first.consultation_id, 1))
        )
    after = await store.load_active(KEY)
    assert after is not None and before is not None
    assert len(after.messages) == len(before.messages) and after.picks is None


async def test_the_brief_is_asked_for_unless_turned_off_or_the_answer_is_json(
    engine: MakeEngine, model: FakeModelServer
) -> None:
    """FINAL_BRIEF adds the "What I took into account" instruction to a final answer."""
    on = engine(default_max_rounds=1)
    off = engine(default_max_rounds=1, final_brief=False)
    await on.turns.ask(UserMessage("tg:1", "Question"))
    await off.turns.ask(UserMessage("tg:2", "Question"))

    assert "What I took into account" in system_of(model.requests[0])
    assert "What I took into account" not in system_of(model.requests[1])


async def test_the_final_answer_now_carries_the_options_already_picked(
    structured: Engine, model: FakeModelServer
) -> None:
    """Options tapped and then "final answer now": the request for the answer is stored
    after the question–answer pairs, so the final answer sees them."""
    model.enqueue(round_json("Two facts.", [("Budget?", ["Low", "High"]), ("City?", [])]))
    first = await structured.turns.ask(UserMessage(KEY, "Which laptop?"))
    await structured.turns.pick(KEY, RoundRef(first.consultation_id, first.round), 1, 1)
    model.enqueue("## Final")
    final = await structured.turns.answer_now(KEY, language="en")

    assert final.is_final
    assert model.requests[-1]["messages"][-1]["content"] == (
        "1. Budget? — Low\nPlease give me your final answer now."
    )


@pytest.mark.parametrize(
    "server", ["openai", "vllm", "fastapi", "llama-cpp-python", "llama-cpp-python-500"]
)
async def test_every_real_servers_refusal_of_json_schema_tries_json_object_with_the_schema(
    structured: Engine, model: FakeModelServer, server: str
) -> None:
    """However a server refuses json_schema (OpenAI's and vLLM's 400, FastAPI's 422 whose
    words are only in its body, llama-cpp-python's 500 or hang-up), the round is asked as
    json_object with the schema (what llama-cpp-python enforces with a grammar), and later
    rounds go straight to that form."""
    model.refuse_format = server
    reply = await structured.turns.ask(UserMessage(KEY, "Which laptop?"))
    await structured.turns.ask(UserMessage(KEY, "Cheap"))

    assert reply.questions == ClarifyingRound("", (Question("Reply to: Which laptop?"),))
    kinds = [response_format_of(body) for body in model.requests]
    assert kinds == [SCHEMA_NAME, "json_object", "json_object"]
    assert format_of(model.requests[1]) == {"type": "json_object", "schema": ROUND_SCHEMA}


async def test_a_round_streamed_in_small_pieces_shows_its_first_words_at_once() -> None:
    """The first words of a preamble are shown from the piece that brings them, not only
    after some dozens of characters; once shown, the text grows at most once per step."""
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    stream = RoundStream(on_text)
    text = ""
    for piece in ['{"pre', 'amble": "', "Hi", " there", ", one", " more"]:
        text += piece
        await stream.feed(text)

    assert shown == ["Hi"]


def test_answers_written_by_answers_text_read_back_by_question() -> None:
    """`answers_read` inverts `answers_text`: each question's value, who gave it aside,
    and typed lines are not answers."""
    round_ = ClarifyingRound(
        "", (Question("Budget?", ("Low", "High")), Question("When — soon?", ("Now", "Later")))
    )
    text = answers_text(
        round_, [Answer(1, option=2, by="Bob"), Answer(2, text="next  week")], "also: x", author="A"
    )
    found = answers_read(round_, text)
    assert found == {1: "High (Bob)", 2: "next week"}
    assert chosen_option(round_.questions[0], found[1]) == 2
    assert chosen_option(round_.questions[1], found[2]) is None
    assert answers_read(round_, "garbage\n\u202e") == {}
