"""The terminal report: one row per scenario and repeat, then the overall numbers.

A score the judge could not give shows as "judge failed" and a consultation that did not
finish as "error": neither is ever printed as a number, so a broken judge cannot pass for
a bad answer. The variants' settings head the report, so every column named after a
variant says what that variant ran with; the question metrics (questions per round,
answers by option, early stops against the scenario's expectation) sit beside the scores,
and the knowledge metrics get a table of their own when knowledge scenarios ran.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console
from rich.table import Table

from evaluation.results import Pairwise, Report, RunResult
from evaluation.summary import (
    PairSummary,
    Summary,
    VariantSummary,
    early_checkable,
    summarise,
)

NONE = "–"


def print_table(report: Report, console: Console, *, summary: Summary | None = None) -> None:
    summary = summary if summary is not None else summarise(report)
    if report.variant_settings:
        console.print(variants_table(report))
    console.print(scenario_table(report, summary))
    console.print(overall_table(summary))
    console.print(questions_table(summary))
    if any(v.knowledge is not None for v in summary.variants):
        console.print(knowledge_table(summary))
    if summary.pairs:
        console.print(pairwise_table(summary.pairs))


def score_text(result: RunResult | None) -> str:
    """A run's score as shown in every report: a number, "judge failed" or "error"."""
    if result is None:
        return NONE
    if result.error is not None:
        return "error"
    if result.judgement is None or result.judgement.score is None:
        return "judge failed"
    return f"{result.judgement.score:.2f}"


def early_text(result: RunResult) -> str:
    """Whether the bot finished early (and whether because the model said it knew enough),
    flagged when the scenario expected otherwise."""
    if result.early_finish:
        kind = "early, model ready" if result.model_ready else "early"
        return f"{kind} (not expected)" if result.expected_early_finish is False else kind
    if result.expected_early_finish and early_checkable(result):
        return "not early (expected)"
    return NONE


def questions_text(result: RunResult) -> str:
    """How one run's bot asked: questions over clarifying rounds, and the answers by option
    out of the questions that offered options ("3q/2r, 1/2 by option")."""
    if not result.clarifying_rounds:
        return NONE
    text = f"{result.questions_asked}q/{result.clarifying_rounds}r"
    if result.questions_with_options:
        text += f", {result.answered_by_option}/{result.questions_with_options} by option"
    return text


def knowledge_text(result: RunResult) -> str:
    """A knowledge scenario's run in short: facts retrieved and stated, labels citing a
    fact, redundant questions and groundedness ("hit 2/2, stated 1/2, cites 1/1, …")."""
    k = result.knowledge
    if k is None or result.error is not None:
        return NONE
    text = f"hit {k.retrieved}/{k.facts}, stated {k.stated}/{k.facts}"
    text += f", cites {k.cited_with_fact}/{k.cited}, redundant {k.redundant}/{k.questions}q"
    grounded = result.judgement.groundedness if result.judgement is not None else None
    return text + ("" if grounded is None else f", grounded {grounded:.2f}")


def variants_table(report: Report) -> Table:
    table = Table(title="Variants", title_justify="left")
    table.add_column("Variant", no_wrap=True)
    table.add_column("Runs with")
    for name, described in report.variant_settings.items():
        table.add_row(name, described)
    return table


def winner_text(judgement: Pairwise | None) -> str:
    if judgement is None:
        return NONE
    if judgement.winner is None:
        return "judge failed"
    if judgement.winner == "tie":
        return "tie"
    return judgement.variant_a if judgement.winner == "a" else judgement.variant_b


def scenario_table(report: Report, summary: Summary) -> Table:
    variants = [v.variant for v in summary.variants]
    table = Table(title="Per scenario", title_justify="left")
    keys = scenario_repeats(report)
    longest = max((len(scenario) for scenario, _ in keys), default=8)
    table.add_column("Scenario", no_wrap=True, min_width=longest)
    table.add_column("Rep", justify="right")
    for name in variants:
        table.add_column(f"Score {name}", justify="right", overflow="fold")
    for pair in summary.pairs:
        table.add_column(f"Better: {pair.variant_a} vs {pair.variant_b}", overflow="fold")
    joined = " · ".join(variants)
    table.add_column(f"Rounds ({joined})", overflow="fold")
    table.add_column("Questions")
    table.add_column("Early")
    knowledge = any(r.knowledge is not None for r in report.results)
    if knowledge:
        table.add_column("Knowledge")
    table.add_column("Tokens in/out")
    table.add_column("Time")

    by_key = {(r.scenario_id, r.repeat, r.variant): r for r in report.results}
    pairwise = {(p.scenario_id, p.repeat, p.variant_a, p.variant_b): p for p in report.pairwise}
    for scenario, repeat in keys:
        runs = [by_key.get((scenario, repeat, name)) for name in variants]
        table.add_row(
            scenario,
            str(repeat + 1),
            *[score_text(run) for run in runs],
            *[
                winner_text(pairwise.get((scenario, repeat, pair.variant_a, pair.variant_b)))
                for pair in summary.pairs
            ],
            _per_variant(runs, lambda r: f"{r.rounds_used}/{r.max_rounds}"),
            _per_variant(runs, questions_text),
            _per_variant(runs, early_text),
            *([_per_variant(runs, knowledge_text)] if knowledge else []),
            _per_variant(runs, lambda r: f"{r.tokens_in}/{r.tokens_out}"),
            _per_variant(runs, lambda r: f"{r.seconds:.1f} s"),
        )
    return table


OVERALL_HEADERS = (
    "Variant",
    "Scored",
    "Mean score [95% CI]",
    "Win rate",
    "Judge failures",
    "Errors",
    "Mean rounds",
    "Early",
    "Tokens in/out",
    "Mean time",
)


def overall_cells(v: VariantSummary) -> list[str]:
    """One variant's overall row, as text (the terminal and the HTML report show the same)."""
    return [
        v.variant,
        f"{v.scored}/{v.runs}",
        mean_text(v),
        percent(v.win_rate),
        str(v.judge_failures),
        str(v.consultation_errors),
        NONE if v.mean_rounds is None else f"{v.mean_rounds:.1f}",
        str(v.early_finishes),
        f"{v.tokens_in}/{v.tokens_out}",
        NONE if v.mean_seconds is None else f"{v.mean_seconds:.1f} s",
    ]


QUESTION_HEADERS = (
    "Variant",
    "Mean rounds",
    "Questions/round",
    "Structured rounds",
    "Answered by option",
    "Early stops (model ready)",
    "Early as expected",
)


def question_cells(v: VariantSummary) -> list[str]:
    """How one variant's bot asked, as text (the terminal and the HTML report show the same)."""
    by_option = percent(v.option_share)
    if v.option_share is not None:
        by_option += f" of {v.questions_with_options}"
    return [
        v.variant,
        NONE if v.mean_rounds is None else f"{v.mean_rounds:.1f}",
        NONE if v.questions_per_round is None else f"{v.questions_per_round:.1f}",
        percent(v.structured_share),
        by_option,
        f"{v.early_finishes} ({v.model_ready})",
        f"{v.early_as_expected}/{v.early_checked}" if v.early_checked else NONE,
    ]


KNOWLEDGE_HEADERS = (
    "Variant",
    "Runs",
    "Hit rate@k",
    "Facts stated",
    "Citation precision",
    "Redundant questions",
    "Groundedness",
)


def knowledge_cells(v: VariantSummary) -> list[str]:
    """One variant's knowledge measures, as text (the terminal and the HTML report show
    the same); "–" for a variant that ran no knowledge scenario to the end."""
    k = v.knowledge
    if k is None:
        return [v.variant, "0", *[NONE] * (len(KNOWLEDGE_HEADERS) - 2)]
    grounded = NONE
    if k.mean_groundedness is not None:
        grounded = f"{k.mean_groundedness:.2f} of {k.grounded_runs}"
    return [
        v.variant,
        str(k.runs),
        _share(k.hit_rate, k.facts),
        _share(k.stated_share, k.facts),
        _share(k.citation_precision, k.cited),
        f"{k.redundant} of {k.questions}",
        grounded,
    ]


def _share(rate: float | None, whole: int) -> str:
    return NONE if rate is None else f"{rate:.0%} of {whole}"


def _variants_table(
    title: str,
    headers: Sequence[str],
    cells: Callable[[VariantSummary], Sequence[str]],
    summary: Summary,
) -> Table:
    """A table of one row a variant (`cells` of it): its name left, its figures right."""
    table = Table(title=title, title_justify="left")
    for header in headers:
        table.add_column(header, justify="left" if header == "Variant" else "right")
    for variant in summary.variants:
        table.add_row(*cells(variant))
    return table


def knowledge_table(summary: Summary) -> Table:
    return _variants_table("Knowledge", KNOWLEDGE_HEADERS, knowledge_cells, summary)


def questions_table(summary: Summary) -> Table:
    return _variants_table("Questions", QUESTION_HEADERS, question_cells, summary)


def overall_table(summary: Summary) -> Table:
    return _variants_table("Overall", OVERALL_HEADERS, overall_cells, summary)


def pairwise_table(pairs: list[PairSummary]) -> Table:
    table = Table(
        title="Pairwise (the judge saw both answers, in random order)", title_justify="left"
    )
    for header in ("A", "B", "A wins", "B wins", "Ties", "Judge failures", "Win rate of A"):
        table.add_column(header, justify="left" if len(header) == 1 else "right")
    for p in pairs:
        table.add_row(
            p.variant_a,
            p.variant_b,
            str(p.wins_a),
            str(p.wins_b),
            str(p.ties),
            str(p.failures),
            percent(p.win_rate_a),
        )
    return table


def mean_text(v: VariantSummary) -> str:
    if v.mean_score is None or v.ci_low is None or v.ci_high is None:
        return NONE
    return f"{v.mean_score:.2f} [{v.ci_low:.2f}–{v.ci_high:.2f}]"


def percent(rate: float | None) -> str:
    return NONE if rate is None else f"{rate:.0%}"


def scenario_repeats(report: Report) -> list[tuple[str, int]]:
    """Scenario and repeat pairs in run order, then any only the results name."""
    keys = [(s, k) for s in report.scenarios for k in range(report.repeats)]
    seen = set(keys)
    for r in report.results:
        if (r.scenario_id, r.repeat) not in seen:
            seen.add((r.scenario_id, r.repeat))
            keys.append((r.scenario_id, r.repeat))
    return keys


def _per_variant(runs: list[RunResult | None], show: Callable[[RunResult], str]) -> str:
    """One value per variant, in the variants' order, as in the "Rounds" header."""
    return " · ".join(NONE if run is None else show(run) for run in runs)
