"""The pairwise judgement: which of two variants' final answers serves the person better.

The judge sees both answers in an order drawn from `order_rng(seed, scenario, repeat)`,
so over many scenarios each variant is shown first about half the time and a judge's
bias for the first (or second) answer cancels out; the same seed gives the same orders.
The judge's "first"/"second" is mapped back to the variants ("a"/"b").
"""

from __future__ import annotations

import random
from typing import Literal

from evaluation.judge import JudgeModel, ask_for_json, scenario_values
from evaluation.judge_json import parse_winner
from evaluation.results import Pairwise
from evaluation.scenarios import Scenario
from evaluation.templates import render


def order_rng(seed: int, scenario_id: str, repeat: int) -> random.Random:
    """The random source for the order of one scenario's pairs in one repetition."""
    return random.Random(f"{seed}:{scenario_id}:{repeat}")


async def judge_pair(
    judge: JudgeModel,
    scenario: Scenario,
    repeat: int,
    a: tuple[str, str | None],
    b: tuple[str, str | None],
    rng: random.Random,
) -> Pairwise:
    """Compare `a` and `b`, each (variant, final answer or None when it has none)."""
    (variant_a, answer_a), (variant_b, answer_b) = a, b
    shown_first: Literal["a", "b"] = "a" if rng.random() < 0.5 else "b"
    pair = Pairwise(scenario.id, repeat, variant_a, variant_b, shown_first, winner=None)
    missing = [variant for variant, answer in (a, b) if not answer]
    if missing or answer_a is None or answer_b is None:
        pair.failure = f"no final answer from {' and '.join(missing)}"
        return pair
    first, second = (answer_a, answer_b) if shown_first == "a" else (answer_b, answer_a)
    prompt = render("pairwise", **scenario_values(scenario), first=first, second=second)
    asked = await ask_for_json(judge, prompt, parse_winner)
    if asked.value is None:
        pair.failure = asked.failure
        return pair
    choice, pair.justification = asked.value
    if choice == "tie":
        pair.winner = "tie"
    else:
        pair.winner = shown_first if choice == "first" else _other(shown_first)
    return pair


def _other(side: Literal["a", "b"]) -> Literal["a", "b"]:
    return "b" if side == "a" else "a"
