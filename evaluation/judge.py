"""The judge: scores one final answer against the scenario's needs and rubric.

Invariant: a failure is never a score (nor a groundedness a knowledge scenario's verdict
lacks). A reply that holds no usable verdict (or a
model error) is asked for once more — the second time with the reason the first
could not be used — and if that fails too the result is a `Judgement` with
`score=None` and the failure, counted as a judge failure by the reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from core.domain.errors import ModelError
from core.domain.knowledge import SECTION_SEPARATOR
from core.domain.ports import Completer, CompletionRequest
from core.prompting.language import LANGUAGE_NAMES
from evaluation.judge_json import parse_judgement
from evaluation.results import GivenPassage, Judgement
from evaluation.scenarios import Scenario
from evaluation.templates import render

ATTEMPTS = 2  # the first reply, and one retry
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class JudgeModel:
    completer: Completer
    model: str
    max_tokens: int


@dataclass(frozen=True, slots=True)
class Asked(Generic[T]):
    value: T | None
    failure: str | None
    raw: str


def scenario_values(scenario: Scenario) -> dict[str, Any]:
    """What the judge's prompts say about the person: everything, the rubric included."""
    facts = list(scenario.hidden_facts)
    facts += [f"{s.name}: {fact}" for s in scenario.speakers for fact in s.hidden_facts]
    change = scenario.behaviour.changes_mind
    return {
        "persona": scenario.persona,
        "speakers": [{"name": s.name, "persona": s.persona} for s in scenario.speakers],
        "first_message": scenario.first_message,
        "hidden_facts": facts,
        "change": change.change if change is not None else None,
        "goal": scenario.goal,
        "language": LANGUAGE_NAMES[scenario.language],
        "rubric": list(scenario.rubric),
    }


def knowledge_values(scenario: Scenario, excerpts: Sequence[GivenPassage]) -> dict[str, Any]:
    """What the judge's prompt says of a knowledge scenario: the excerpts the final answer
    was given, quoted as the bot's prompt quotes them, and what they do not cover."""
    assert scenario.knowledge is not None
    return {
        "passages": [
            {
                "label": p.label,
                "place": SECTION_SEPARATOR.join(part for part in (p.title, p.section) if part),
                "quoted": "\n".join(f"> {line}" for line in p.text.splitlines()),
            }
            for p in excerpts
        ],
        "not_covered": scenario.knowledge.not_covered,
    }


async def judge_answer(
    judge: JudgeModel,
    scenario: Scenario,
    answer: str,
    *,
    excerpts: Sequence[GivenPassage] = (),
) -> Judgement:
    """The judge's verdict; a knowledge scenario's (one with `knowledge`) also rates the
    answer's groundedness in `excerpts`, the passages its final answer was given."""
    grounded = scenario.knowledge is not None
    knowledge = knowledge_values(scenario, excerpts) if grounded else None
    prompt = render("judge", **scenario_values(scenario), answer=answer, knowledge=knowledge)
    asked = await ask_for_json(judge, prompt, lambda text: parse_judgement(text, grounded=grounded))
    if asked.value is None:
        return Judgement(score=None, failure=asked.failure, raw=asked.raw)
    return asked.value


async def ask_for_json(judge: JudgeModel, prompt: str, parse: Callable[[str], T]) -> Asked[T]:
    """Ask `prompt`; retry once with the reason when the reply cannot be parsed."""
    messages = [{"role": "user", "content": prompt}]
    failure = "no reply"
    raw = ""
    for _ in range(ATTEMPTS):
        request = CompletionRequest(
            messages=list(messages), model=judge.model, max_tokens=judge.max_tokens, json_mode=True
        )
        try:
            raw = (await judge.completer.complete(request)).text
        except ModelError as exc:
            failure = f"judge model error: {exc}"
            continue
        try:
            return Asked(parse(raw), None, raw)
        except ValueError as exc:
            failure = f"unparseable judge reply: {exc}"
            messages = [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": raw},
                {"role": "user", "content": render("judge_retry", problem=str(exc))},
            ]
    return Asked(None, failure, raw)
