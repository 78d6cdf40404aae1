"""The evaluator with structured clarifying rounds, through the real engine and the three
fake model servers: the simulated user sees the options and chooses by label, its choices
reach the bot as answers to the round, and both ways of asking run side by side."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.domain.clarifying import SCHEMA_NAME
from evaluation.evaluate import Plan, evaluate
from evaluation.results import AskedQuestion, Pick, Report, SeenMessage
from evaluation.scenarios import PERSONA_TYPES, Expect, Scenario, load_scenarios
from evaluation.simulated_user import user_prompt
from evaluation.summary import summarise
from evaluation.variants import QUESTION_MODES, build_variants
from fakes.model_server import response_format_of
from tests.routed_model import RoleServers, role_servers

SCENARIOS = Path(__file__).resolve().parent / "evaluation_scenarios"
CURL, _ = load_scenarios(SCENARIOS)
STRUCTURED = "questions:structured"
TEXT = "questions:text"

EQUIPMENT = "What equipment do you have at home?"
INJURIES = "Any injuries?"
FINAL = "## Your plan\nStart with the 2 kg dumbbell: 3×12, Mon/Wed/Fri. Mind the elbow."
JUDGE_OK = '{"score": 0.9, "justification": "Uses the facts.", "covered": ["2 kg"], "missed": []}'


FIRST_ROUND = (
    "Two things first.",
    [(EQUIPMENT, ["Dumbbells 2 and 5 kg", "Nothing"]), (INJURIES, ["None", "Elbow", "Knee"])],
)


@pytest.fixture
async def servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RoleServers]:
    monkeypatch.chdir(tmp_path)  # no stray .env
    async with role_servers() as started:
        yield started


async def run(
    servers: RoleServers, tmp_path: Path, scenario: Scenario, questions: list[str]
) -> Report:
    plan = Plan(
        scenarios=[scenario],
        variants=build_variants([], [], [], baseline=False, questions=questions),
        concurrency=1,
    )
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    return await evaluate(servers.settings(tmp_path), servers.roles(tmp_path), plan, workdir)


def asks_round(body: dict[str, Any]) -> bool:
    return response_format_of(body) == SCHEMA_NAME


def last_user_text(body: dict[str, Any]) -> str:
    return str(next(m for m in reversed(body["messages"]) if m["role"] == "user")["content"])


async def test_a_chosen_option_reaches_the_model_as_a_question_answer_line(
    servers: RoleServers, tmp_path: Path
) -> None:
    """The user sees the options labelled 1a)…, chooses two by label and types a remark;
    the bot is sent `question — option` lines and the remark, and the model's ready flag
    ends the consultation early in the same turn."""
    scenario = dataclasses.replace(CURL, expect=Expect(early_finish=True))
    servers.bot.enqueue_round(*FIRST_ROUND)
    servers.bot.enqueue_round("", [], ready_for_final=True)
    servers.bot.enqueue(FINAL)
    servers.user.enqueue("1a\n2b)\nIt aches after long typing.")
    servers.judge.enqueue(JUDGE_OK)

    [result] = (await run(servers, tmp_path, scenario, ["structured"])).results

    assert result.error is None and result.variant == STRUCTURED
    # What the simulated user was shown: the round's text, then its options labelled.
    [asked_user] = servers.user.requests
    assert asked_user["messages"][1] == {
        "role": "user",
        "content": (
            f"Two things first.\n\n1. {EQUIPMENT}\n2. {INJURIES}\n\n"
            "1a) Dumbbells 2 and 5 kg\n1b) Nothing\n2a) None\n2b) Elbow\n2c) Knee"
        ),
    }
    assert "write its label alone on its own line" in asked_user["messages"][0]["content"]
    # What the bot was sent: the choices as question–answer lines, then the remark.
    assert [asks_round(r) for r in servers.bot.requests] == [True, True, False]
    assert last_user_text(servers.bot.requests[1]) == (
        f"1. {EQUIPMENT} — Dumbbells 2 and 5 kg\n2. {INJURIES} — Elbow\nIt aches after long typing."
    )
    assert result.transcript[1] == SeenMessage(
        "bot",
        f"Two things first.\n\n1. {EQUIPMENT}\n2. {INJURIES}",
        round=1,
        questions=[
            AskedQuestion(EQUIPMENT, ["Dumbbells 2 and 5 kg", "Nothing"]),
            AskedQuestion(INJURIES, ["None", "Elbow", "Knee"]),
        ],
        asked=2,
    )
    assert result.transcript[2].picks == [
        Pick(1, 1, f"{EQUIPMENT} — Dumbbells 2 and 5 kg"),
        Pick(2, 2, f"{INJURIES} — Elbow"),
    ]
    assert result.transcript[-1] == SeenMessage("bot", FINAL, round=2, model_ready=True)
    assert result.final_answer == FINAL
    assert (result.early_finish, result.model_ready, result.rounds_used) == (True, True, 2)
    assert (result.clarifying_rounds, result.structured_rounds, result.questions_asked) == (
        1,
        1,
        2,
    )
    assert (result.questions_with_options, result.answered_by_option) == (2, 2)


async def test_a_reply_without_a_readable_choice_is_sent_as_typed(
    servers: RoleServers, tmp_path: Path
) -> None:
    """A message naming no option the round has (a label out of range, prose) goes to the
    bot exactly as written, and counts as no answer by option."""
    servers.bot.enqueue_round(*FIRST_ROUND)
    servers.bot.enqueue_round("One more.", [("How many days a week?", ["2", "3"])])
    servers.bot.enqueue(FINAL)
    servers.user.enqueue("3a\nJust the two dumbbells, and my elbow hurts.")
    servers.user.enqueue("Three times.")
    servers.judge.enqueue(JUDGE_OK)

    [result] = (await run(servers, tmp_path, CURL, ["structured"])).results

    assert result.error is None
    assert last_user_text(servers.bot.requests[1]) == (
        "3a\nJust the two dumbbells, and my elbow hurts."
    )
    assert last_user_text(servers.bot.requests[2]) == "Three times."
    assert [t.picks for t in result.transcript if t.speaker == "user"] == [[], [], []]
    assert (result.clarifying_rounds, result.questions_asked) == (2, 3)
    assert (result.questions_with_options, result.answered_by_option) == (3, 0)
    assert not result.early_finish and not result.model_ready


async def test_both_ways_of_asking_run_side_by_side(servers: RoleServers, tmp_path: Path) -> None:
    """`--questions structured --questions text`: one variant asks for clarifying_round
    JSON (LLM_STRUCTURED_QUESTIONS=on), the other in text (off); each result names its
    variant, the report says what each ran with, and the judge compares the two answers."""
    servers.bot.enqueue_round(*FIRST_ROUND)  # the structured variant runs first
    servers.bot.enqueue_round("Last one.", [("How many days a week?", ["2", "3"])])
    servers.bot.enqueue(FINAL)
    servers.bot.enqueue("1. What equipment do you have?\n2. Any injuries?")  # then the text one
    servers.bot.enqueue("How many days a week?")
    servers.bot.enqueue(FINAL)
    servers.user.enqueue("1a\n2b")
    servers.user.enqueue("2b\nthree would be too much")  # 2b: question 2 is not in this round
    servers.user.enqueue("2 and 5 kg dumbbells; my elbow aches.")
    servers.user.enqueue("Three.")
    servers.judge.enqueue(JUDGE_OK)
    servers.judge.enqueue(JUDGE_OK)
    servers.judge.enqueue('{"winner": "tie", "justification": "Both fine."}')

    report = await run(servers, tmp_path, CURL, ["structured", "text"])

    assert report.variants == [STRUCTURED, TEXT]
    assert "LLM_STRUCTURED_QUESTIONS=on" in report.variant_settings[STRUCTURED]
    assert "LLM_STRUCTURED_QUESTIONS=off" in report.variant_settings[TEXT]
    structured, text = report.results
    assert (structured.variant, text.variant) == (STRUCTURED, TEXT)
    assert structured.error is None and text.error is None
    assert [asks_round(r) for r in servers.bot.requests] == [True, True, False] + [False] * 3
    assert (structured.structured_rounds, text.structured_rounds) == (2, 0)
    assert (structured.clarifying_rounds, text.clarifying_rounds) == (2, 2)
    assert (structured.questions_asked, text.questions_asked) == (3, 3)  # text: its "?"
    assert (structured.answered_by_option, structured.questions_with_options) == (2, 3)
    assert text.questions_with_options == 0
    [pair] = report.pairwise
    assert (pair.variant_a, pair.variant_b, pair.winner) == (STRUCTURED, TEXT, "tie")

    summary = summarise(report)
    assert summary.variant(STRUCTURED).option_share == pytest.approx(2 / 3)
    assert summary.variant(STRUCTURED).structured_share == 1.0
    assert summary.variant(TEXT).option_share is None
    assert summary.variant(TEXT).structured_share == 0.0
    assert summary.variant(TEXT).questions_per_round == pytest.approx(1.5)


def test_each_persona_type_gets_its_own_rules() -> None:
    """The six ClarifyMT-Bench user types render six different prompts, each with only its
    own way of answering."""
    rules = {
        "precise": "directly, specifically and truthfully",
        "vague": "You answer vaguely and only in part",
        "off-focus": "You drift off the point",
        "contradictory": "You are inconsistent without noticing it",
        "factually-wrong": "You are confident about things you have wrong",
        "refusing": "You are reluctant to share details",
    }
    assert set(rules) == set(PERSONA_TYPES)
    for kind, rule in rules.items():
        prompt = user_prompt(
            dataclasses.replace(CURL, persona_type=kind), None, 1, opening=CURL.first_message
        )
        assert rule in prompt, kind
        assert [other for other in rules.values() if other in prompt] == [rule], kind
        assert "its label alone" not in prompt  # no options offered, no word of choosing


def test_the_variants_of_questions_and_their_settings() -> None:
    """structured is LLM_STRUCTURED_QUESTIONS=on, text off; a value given twice is one
    variant; the baseline asks like the first variant; without the switch the
    deployment's setting holds."""
    variants = build_variants([3], [], [], questions=["text", "structured", "text"])
    assert [(v.name, v.questions) for v in variants] == [
        ("questions:text", "text"),
        ("questions:structured", "structured"),
        ("one-shot", "text"),
    ]
    assert [QUESTION_MODES[v.questions or ""] for v in variants] == ["off", "on", "off"]
    assert [v.questions for v in build_variants([], [], [])] == [None, None]
    assert [v.name for v in build_variants([2, 4], [], [], questions=["structured"])] == [
        "questions:structured 2-round",
        "questions:structured 4-round",
        "one-shot",
    ]
