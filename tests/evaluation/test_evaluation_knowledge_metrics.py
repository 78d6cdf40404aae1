"""The exact knowledge measures, the knowledge part of a scenario file, and the judge's
groundedness: pure checks on hand-made runs and replies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.settings import load_settings
from evaluation.evaluate import _variant_settings
from evaluation.judge_json import parse_judgement
from evaluation.knowledge_metrics import check_knowledge, holds
from evaluation.results import AskedQuestion, GivenPassage, RunResult, SeenMessage
from evaluation.scenarios import Fact, KnowledgeNeeds, ScenarioError, load_scenario
from evaluation.variants import build_variants
from tests.routed_model import role_servers

PRICE = Fact("prices.md", "£1,149", ("1,149", "1149"), ("how much it costs",))
TERMS = Fact("finance.md", "0% interest", ("0%",), ("interest rate",))
NEEDS = KnowledgeNeeds(Path("/kb"), (PRICE, TERMS))


def given(label: str, document: str, text: str) -> GivenPassage:
    return GivenPassage(label, document, "Title", "", text)


def run(rounds: list[SeenMessage], final: str, passages: list[GivenPassage]) -> RunResult:
    result = RunResult("s", "v", 0, final_answer=final)
    result.transcript = [*rounds, SeenMessage("bot", final, round=2, knowledge=passages)]
    return result


def test_literals_ignore_case_spacing_emphasis_and_yo() -> None:
    assert holds("Цена: **1 990 ₽**, в т.ч. НДС", "1990 ₽")
    assert holds("Ещё 24\u00a0Months", "еще 24 months")
    assert not holds("5 000 ₽", "500 ₽")


def test_a_fact_is_retrieved_only_from_its_own_document_in_the_final_call() -> None:
    """The price quoted in another document does not count; a passage given to a round
    but not to the final answer does not either."""
    rounds = [
        SeenMessage(
            "bot", "Q?", round=1, asked=1, knowledge=[given("K1", "finance.md", "0% interest")]
        )
    ]
    check = check_knowledge(
        NEEDS, run(rounds, "It costs £1,149.", [given("K1", "other.md", "£1,149 here too")])
    )
    assert (check.facts, check.retrieved, check.stated, check.given) == (2, 0, 1, 1)


def test_citation_precision_counts_each_label_once_and_a_label_beyond_the_passages_as_cited() -> (
    None
):
    passages = [
        given("K1", "prices.md", "NC-70: £1,149"),
        given("K2", "faq.md", "Collect in store"),
    ]
    check = check_knowledge(NEEDS, run([], "£1,149 [K1]. Also [K1, K2] and [K9].", passages))
    assert (check.cited, check.cited_with_fact) == (3, 1)
    assert check_knowledge(NEEDS, run([], "No citations.", passages)).cited == 0


def test_a_question_is_redundant_when_a_passage_given_to_its_round_answered_it() -> None:
    """A structured round's questions one by one; a text round's sentences ending in "?";
    the same question is not redundant in a round whose passages did not hold the fact."""
    terms = [given("K1", "finance.md", "12 months at 0% interest")]
    structured = SeenMessage(
        "bot",
        "Two things.",
        round=1,
        asked=2,
        questions=[AskedQuestion("What interest rate do they charge?"), AskedQuestion("Budget?")],
        knowledge=terms,
    )
    text = SeenMessage(
        "bot",
        "Thanks. What Interest Rate?? And the deposit? Fine.",
        round=2,
        asked=2,
        knowledge=terms,
    )
    bare = SeenMessage("bot", "What interest rate?", round=3, asked=1, knowledge=[])
    check = check_knowledge(NEEDS, run([structured, text, bare], "Final.", []))
    assert (check.questions, check.redundant) == (5, 2)


def test_a_run_without_a_final_answer_counts_its_replies_as_rounds() -> None:
    result = RunResult("s", "v", 0, error="ModelError")
    result.transcript = [
        SeenMessage(
            "bot",
            "What interest rate?",
            round=1,
            asked=1,
            knowledge=[given("K1", "finance.md", "0% interest")],
        )
    ]
    check = check_knowledge(NEEDS, result)
    assert (check.retrieved, check.cited, check.questions, check.redundant) == (0, 0, 1, 1)


def test_the_judge_must_rate_groundedness_for_a_knowledge_scenario() -> None:
    reply = '{"score": 0.5, "groundedness": "0.25", "unsupported": "a fee"}'
    judged = parse_judgement(reply, grounded=True)
    assert (judged.groundedness, judged.unsupported) == (0.25, ["a fee"])
    assert parse_judgement(reply).groundedness is None
    with pytest.raises(ValueError, match='no "groundedness"'):
        parse_judgement('{"score": 0.5}', grounded=True)
    with pytest.raises(ValueError, match=re.escape('"groundedness" 1.5 is outside 0..1')):
        parse_judgement('{"score": 0.5, "groundedness": 1.5}', grounded=True)


SCENARIO = """\
id: kb
title: t
language: en
role: expert
first_message: m
persona: p
hidden_facts: [f]
goal: g
rubric: [a, b]
knowledge:
"""


@pytest.mark.parametrize(
    ("knowledge", "problem"),
    [
        ("  documents: docs\n", "knowledge.facts: is required (or not_covered"),
        (
            "  documents: docs\n  facts: [{document: ../x.md, passage: p}]\n",
            "knowledge.facts[0].document: must be a path inside",
        ),
        (
            "  documents: docs\n  facts: [{document: x.md, passage: p, answr: [a]}]\n",
            "knowledge.facts[0].answr: unknown key",
        ),
        ("  facts: [{document: x.md, passage: p}]\n", "knowledge.documents: is required"),
        (
            "  documents: docs\n  facts: [{document: x.md, passage: p, asked_as: []}]\n",
            "asked_as: must list at least 1 item",
        ),
    ],
)
def test_a_bad_knowledge_section_names_its_field(
    tmp_path: Path, knowledge: str, problem: str
) -> None:
    path = tmp_path / "kb.yaml"
    path.write_text(SCENARIO + knowledge, encoding="utf-8")
    with pytest.raises(ScenarioError, match=re.escape(problem)):
        load_scenario(path)


def test_a_knowledge_section_reads_its_folder_against_the_file(tmp_path: Path) -> None:
    path = tmp_path / "kb.yaml"
    knowledge = (
        "  documents: ../docs\n  facts: [{document: a/x.md, passage: p}]\n  not_covered: n\n"
    )
    path.write_text(SCENARIO + knowledge, encoding="utf-8")
    needs = load_scenario(path).knowledge
    assert needs == KnowledgeNeeds(tmp_path.parent / "docs", (Fact("a/x.md", "p", ("p",)),), "n")


def test_knowledge_on_and_off_multiply_the_variants_and_the_baseline_follows_the_first() -> None:
    variants = build_variants([2, 3], [], [], knowledge=["off", "on", "off"])
    assert [v.name for v in variants] == [
        "knowledge:off 2-round",
        "knowledge:off 3-round",
        "knowledge:on 2-round",
        "knowledge:on 3-round",
        "one-shot",
    ]
    assert [v.loads_knowledge for v in variants] == [False, False, True, True, False]
    assert build_variants([], [], [])[0].loads_knowledge


async def test_a_variant_never_uses_the_deployments_database(tmp_path: Path) -> None:
    """With DATABASE_URL set, the evaluator's stores are still its throwaway SQLite
    files: loading the example knowledge base must not write to the operator's database."""
    async with role_servers() as servers:
        roles = servers.roles(tmp_path)
        settings = servers.settings(tmp_path).model_copy(
            update={
                "database_url": load_settings(
                    _env_file=None,
                    openai_api_key="k",
                    database_url="postgresql://x@127.0.0.1:1/prod",
                ).database_url
            }
        )
    [variant, _] = build_variants([], [], [])
    configured = _variant_settings(settings, roles, variant, tmp_path / "store.sqlite3")
    assert configured.secret("database_url") is None
    assert configured.db_path == tmp_path / "store.sqlite3"
