"""The judge's JSON, the pairwise order, and the simulated user's cues."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.llm.llm import OpenAICompleter
from evaluation.judge import JudgeModel
from evaluation.judge_json import parse_judgement, parse_winner
from evaluation.pairwise import judge_pair, order_rng
from evaluation.scenarios import Behaviour, ChangeOfMind, load_scenarios
from evaluation.simulated_user import user_prompt
from evaluation.variants import build_variants, variant_pairs
from fakes.model_server import FakeModelServer

CURL, TRIP = load_scenarios(Path(__file__).resolve().parent / "evaluation_scenarios")


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ('{"score": 0.5, "justification": "ok"}', 0.5),
        ('```json\n{"score": 1, "justification": "ok"}\n```', 1.0),
        ('Verdict:\n```\n{"score": 0, "justification": "bad"}\n```\nThanks.', 0.0),
        ("Sure. {'score': 0.25, 'justification': 'meh',}", 0.25),
        ('{"score": "0.6", "justification": "a string score is still a number"', 0.6),
        ('{"score": 0.7, "covered": "one point", "missed": null}', 0.7),
    ],
)
def test_a_verdict_is_found_and_repaired(reply: str, score: float) -> None:
    judgement = parse_judgement(reply)
    assert judgement.score == score and judgement.failure is None and judgement.raw == reply


def test_covered_and_missed_are_lists_of_texts() -> None:
    judgement = parse_judgement('{"score": 0.7, "covered": "one point", "missed": null}')
    assert (judgement.covered, judgement.missed) == (["one point"], [])


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("A solid B.", "no JSON object in the reply"),
        ("[0.5]", "no JSON object in the reply"),
        ('{"justification": "no score"}', 'the JSON has no "score"'),
        ('{"score": null}', 'the JSON has no "score"'),
        ('{"score": "high"}', "\"score\" is not a number: 'high'"),
        ('{"score": true}', '"score" is not a number: True'),
        ('{"score": 7}', '"score" 7 is outside 0..1'),
        ('{"score": -0.1}', '"score" -0.1 is outside 0..1'),
        ('{"score": NaN}', '"score" is not a number'),
    ],
)
def test_nothing_is_guessed_or_clamped(reply: str, problem: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(problem)}"):
        parse_judgement(reply)


@pytest.mark.parametrize(
    ("reply", "winner"),
    [('{"winner": "first"}', "first"), ('```{"winner": " Second "}```', "second")],
)
def test_a_pairwise_winner_is_read(reply: str, winner: str) -> None:
    assert parse_winner(reply)[0] == winner


def test_a_pairwise_reply_without_a_known_winner_is_refused() -> None:
    with pytest.raises(ValueError, match='"winner" must be'):
        parse_winner('{"winner": "A"}')


@pytest.fixture
async def judge(model_server: FakeModelServer) -> AsyncIterator[JudgeModel]:
    completer = OpenAICompleter(
        api_key="k", base_url=model_server.base_url, timeout=10, max_retries=0
    )
    yield JudgeModel(completer, "judge-model", 200)
    await completer.close()


async def test_both_orders_are_shown_over_seeds_and_mapped_back(
    judge: JudgeModel, model_server: FakeModelServer
) -> None:
    """The judge always prefers whichever answer mentions 2 kg; shown first or second,
    that is variant a's, so a wins every time; each order occurs over the seeds."""

    def prefer_two_kg(body: dict[str, object]) -> str:
        prompt = json.dumps(body, ensure_ascii=False)
        first = prompt.index("The first answer")
        winner = "first" if prompt.index("2 kg", first) < prompt.index("The second") else "second"
        return json.dumps({"winner": winner, "justification": "mentions 2 kg"})

    model_server.default_reply = prefer_two_kg
    shown = []
    for seed in range(8):
        pair = await judge_pair(
            judge,
            CURL,
            0,
            ("N-round", "Use the 2 kg dumbbell."),
            ("one-shot", "Use any dumbbell."),
            order_rng(seed, CURL.id, 0),
        )
        assert pair.winner == "a" and pair.failure is None
        shown.append(pair.shown_first)
    assert set(shown) == {"a", "b"}
    # The same seed, scenario and repeat give the same order.
    again = [order_rng(seed, CURL.id, 0).random() < 0.5 for seed in range(8)]
    assert [s == "a" for s in shown] == again


async def test_a_tie_and_a_failed_pairwise_judgement(
    judge: JudgeModel, model_server: FakeModelServer
) -> None:
    model_server.enqueue('{"winner": "tie"}')
    rng = order_rng(0, CURL.id, 0)
    tie = await judge_pair(judge, CURL, 0, ("x", "one"), ("y", "two"), rng)
    assert tie.winner == "tie"
    model_server.enqueue("no idea")
    model_server.enqueue('{"winner": "both"}')
    failed = await judge_pair(judge, CURL, 0, ("x", "one"), ("y", "two"), rng)
    assert failed.winner is None
    assert failed.failure is not None and '"winner" must be' in failed.failure
    missing = await judge_pair(judge, CURL, 0, ("x", "one"), ("y", None), rng)
    assert (missing.winner, missing.failure) == (None, "no final answer from y")
    assert len(model_server.requests) == 3  # nothing asked without two answers


def test_the_simulated_user_s_cues_apply_to_their_own_message_only() -> None:
    scenario = dataclasses.replace(
        CURL,
        behaviour=Behaviour(
            answers="partial",
            asks_for_answer_immediately=True,
            changes_mind=ChangeOfMind(after_round=2, change="Now I want to climb."),
        ),
    )
    after_one = user_prompt(scenario, None, 1, opening=None)
    after_two = user_prompt(scenario, None, 2, opening=None)
    assert "answer only the first of the consultant's questions" in after_one
    assert "answer only the first of the consultant's questions" in after_two
    assert "give you the answer right away" in after_one
    assert "give you the answer right away" not in after_two
    assert "Now I want to climb." not in after_one
    assert "changed your mind: Now I want to climb." in after_two
    plain = user_prompt(CURL, None, 1, opening=None)
    for cue in ("answer only the first", "right away", "changed your mind"):
        assert cue not in plain
    for point in CURL.rubric:
        assert point not in plain


def test_variants_and_pairs_follow_the_options() -> None:
    assert [v.name for v in build_variants([], [], [])] == ["N-round", "one-shot"]
    three_five = build_variants([3, 5], [], [])
    assert [(v.name, v.rounds_for(CURL)) for v in three_five] == [
        ("3-round", 3),
        ("5-round", 5),
        ("one-shot", 1),
    ]
    assert [(a.name, b.name) for a, b in variant_pairs(three_five)] == [
        ("3-round", "one-shot"),
        ("5-round", "one-shot"),
        ("3-round", "5-round"),
    ]
    prompts = build_variants([], [Path("a/old"), Path("b/new")], ["m1"], baseline=False)
    assert [v.name for v in prompts] == ["prompts:old", "prompts:new"]
    assert [v.bot_model for v in prompts] == ["m1", "m1"]
    assert [v.rounds_for(TRIP) for v in prompts] == [3, 3]
    models = build_variants([4], [], ["x", "y"])
    assert [v.name for v in models] == ["model:x", "model:y", "one-shot"]
    assert models[-1].bot_model == "x" and models[0].max_rounds == 4
