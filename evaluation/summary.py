"""The numbers of an evaluation run: per-variant scores with a bootstrap interval, pairwise
win rates, and how the bot asked (questions per round, answers by option, early stops).

Pure functions of a `Report`. A judge failure or a consultation error is counted, never
averaged as a score. The bootstrap is seeded from the report's seed and the variant's
name, so the same report always gives the same interval. The question metrics are over
the consultations that finished; an early stop is checked against the scenario's
`expect.early_finish` only where one was possible (more than one round, and the user did
not press "final answer now"). The knowledge metrics are over the knowledge scenarios'
finished runs, pooled (hit rate: facts retrieved / facts needed over every such run;
citation precision: labels citing a fact / labels cited), and the mean groundedness
over those the judge rated.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from evaluation.results import Pairwise, Report, RunResult


@dataclass(frozen=True, slots=True)
class VariantSummary:
    """One variant's results over every scenario and repeat."""

    variant: str
    runs: int
    scored: int  # runs the judge gave a score
    mean_score: float | None
    ci_low: float | None  # bootstrap 95 % interval of the mean (percentile method)
    ci_high: float | None
    judge_failures: int  # the consultation finished but the judge gave no score
    consultation_errors: int  # the consultation itself did not finish
    mean_rounds: float | None  # over the consultations that finished
    early_finishes: int
    tokens_in: int
    tokens_out: int
    mean_seconds: float | None
    win_rate: float | None  # over every pairwise judgement the variant took part in
    questions_per_round: float | None = None  # questions asked / clarifying rounds
    structured_share: float | None = None  # clarifying rounds asked as structured replies
    # Questions with options the user answered by writing, and the share answered by option.
    questions_with_options: int = 0
    option_share: float | None = None
    model_ready: int = 0  # early finishes because the model said it knew enough
    early_checked: int = 0  # runs whose scenario states whether to stop early
    early_as_expected: int = 0  # of those, the runs that did as stated
    knowledge: KnowledgeSummary | None = None  # None: no knowledge scenario finished


@dataclass(frozen=True, slots=True)
class KnowledgeSummary:
    """One variant's knowledge measures, pooled over its knowledge scenarios' finished runs
    (`evaluation.knowledge_metrics` defines each count)."""

    runs: int
    facts: int
    retrieved: int
    stated: int
    cited: int
    cited_with_fact: int
    questions: int
    redundant: int
    grounded_runs: int  # runs the judge rated for groundedness
    mean_groundedness: float | None
    hit_rate: float | None  # retrieved / facts
    stated_share: float | None  # stated / facts
    citation_precision: float | None  # cited_with_fact / cited; None: nothing cited


@dataclass(frozen=True, slots=True)
class PairSummary:
    """The pairwise judgements between two variants."""

    variant_a: str
    variant_b: str
    wins_a: int
    wins_b: int
    ties: int
    failures: int

    @property
    def decided(self) -> int:
        return self.wins_a + self.wins_b + self.ties

    @property
    def win_rate_a(self) -> float | None:
        """(wins of a + half the ties) / decided judgements; None when none was decided."""
        return (self.wins_a + self.ties / 2) / self.decided if self.decided else None


@dataclass(frozen=True, slots=True)
class Summary:
    variants: list[VariantSummary] = field(default_factory=list)
    pairs: list[PairSummary] = field(default_factory=list)

    def variant(self, name: str) -> VariantSummary:
        for summary in self.variants:
            if summary.variant == name:
                return summary
        raise KeyError(name)


def bootstrap_interval(
    scores: Sequence[float], *, seed: str, resamples: int = 2000
) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the means of `resamples` resamples with
    replacement. Deterministic for a given seed; one score gives (score, score)."""
    if not scores:
        raise ValueError("no scores to resample")
    if len(scores) == 1:
        return (scores[0], scores[0])
    rng = random.Random(seed)
    n = len(scores)
    means = sorted(sum(rng.choices(scores, k=n)) / n for _ in range(resamples))
    return (percentile(means, 0.025), percentile(means, 0.975))


def percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between the closest ranks of an ascending sequence."""
    position = q * (len(ordered) - 1)
    lower = int(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarise(report: Report, *, resamples: int = 2000) -> Summary:
    """Per-variant and per-pair numbers, variants in the report's order (then any variant
    that appears only in the results), pairs in order of first appearance."""
    pairs = _pairs(report.pairwise)
    names = list(report.variants)
    for result in report.results:
        if result.variant not in names:
            names.append(result.variant)
    variants = [
        _variant(
            name,
            [r for r in report.results if r.variant == name],
            pairs,
            seed=f"{report.seed}:{name}",
            resamples=resamples,
        )
        for name in names
    ]
    return Summary(variants=variants, pairs=pairs)


def _variant(
    name: str,
    results: list[RunResult],
    pairs: list[PairSummary],
    *,
    seed: str,
    resamples: int,
) -> VariantSummary:
    scores = [
        r.judgement.score
        for r in results
        if r.judgement is not None and r.judgement.score is not None
    ]
    finished = [r for r in results if r.error is None]
    rounds = sum(r.clarifying_rounds for r in finished)
    with_options = sum(r.questions_with_options for r in finished)
    checked = [r for r in finished if early_checkable(r)]
    interval = bootstrap_interval(scores, seed=seed, resamples=resamples) if scores else None
    points = decided = 0.0
    for pair in pairs:
        if pair.variant_a == name:
            points += pair.wins_a + pair.ties / 2
            decided += pair.decided
        elif pair.variant_b == name:
            points += pair.wins_b + pair.ties / 2
            decided += pair.decided
    return VariantSummary(
        variant=name,
        runs=len(results),
        scored=len(scores),
        mean_score=_mean(scores),
        ci_low=interval[0] if interval else None,
        ci_high=interval[1] if interval else None,
        judge_failures=sum(1 for r in finished if r.judgement is None or r.judgement.score is None),
        consultation_errors=len(results) - len(finished),
        mean_rounds=_mean([r.rounds_used for r in finished]),
        early_finishes=sum(1 for r in results if r.early_finish),
        tokens_in=sum(r.tokens_in for r in results),
        tokens_out=sum(r.tokens_out for r in results),
        mean_seconds=_mean([r.seconds for r in results]),
        win_rate=points / decided if decided else None,
        questions_per_round=_ratio(sum(r.questions_asked for r in finished), rounds),
        structured_share=_ratio(sum(r.structured_rounds for r in finished), rounds),
        questions_with_options=with_options,
        option_share=_ratio(sum(r.answered_by_option for r in finished), with_options),
        model_ready=sum(1 for r in results if r.early_finish and r.model_ready),
        early_checked=len(checked),
        early_as_expected=sum(1 for r in checked if r.early_finish == r.expected_early_finish),
        knowledge=knowledge_summary(finished),
    )


def knowledge_summary(finished: Sequence[RunResult]) -> KnowledgeSummary | None:
    """The knowledge measures pooled over the finished runs that have them."""
    checks = [(r, r.knowledge) for r in finished if r.knowledge is not None]
    if not checks:
        return None
    rated = [
        r.judgement.groundedness
        for r, _ in checks
        if r.judgement is not None and r.judgement.groundedness is not None
    ]
    facts = sum(k.facts for _, k in checks)
    retrieved = sum(k.retrieved for _, k in checks)
    stated = sum(k.stated for _, k in checks)
    cited = sum(k.cited for _, k in checks)
    cited_with_fact = sum(k.cited_with_fact for _, k in checks)
    return KnowledgeSummary(
        runs=len(checks),
        facts=facts,
        retrieved=retrieved,
        stated=stated,
        cited=cited,
        cited_with_fact=cited_with_fact,
        questions=sum(k.questions for _, k in checks),
        redundant=sum(k.redundant for _, k in checks),
        grounded_runs=len(rated),
        mean_groundedness=_mean(rated),
        hit_rate=_ratio(retrieved, facts),
        stated_share=_ratio(stated, facts),
        citation_precision=_ratio(cited_with_fact, cited),
    )


def early_checkable(result: RunResult) -> bool:
    """Whether the run can be held to its scenario's `expect.early_finish`."""
    return (
        result.expected_early_finish is not None
        and result.max_rounds > 1
        and not result.final_now_pressed
    )


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _pairs(judgements: list[Pairwise]) -> list[PairSummary]:
    counts: dict[tuple[str, str], list[int]] = {}
    for p in judgements:
        tally = counts.setdefault((p.variant_a, p.variant_b), [0, 0, 0, 0])
        index = {"a": 0, "b": 1, "tie": 2, None: 3}[p.winner]
        tally[index] += 1
    return [
        PairSummary(a, b, wins_a=t[0], wins_b=t[1], ties=t[2], failures=t[3])
        for (a, b), t in counts.items()
    ]
