"""The score distributions as an inline SVG strip-and-box plot, one row per variant.

Each judged run is one dot (a judge failure or a consultation error is no dot: it is
counted in the row's label instead); the box spans the quartiles with the median, the
whiskers the range, and the bar under it the mean's bootstrap 95 % interval. Drawn in
Python so the HTML report needs no script and no network. Every text is escaped.
"""

from __future__ import annotations

from html import escape

from evaluation.results import Report
from evaluation.summary import Summary, percentile

LEFT = 150  # room for the variant's name
PLOT = 520  # width of the 0..1 axis
RIGHT = 150  # room for the counts
ROW = 64
TOP = 16
TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)
COLOURS = ("#2f6db3", "#c2571a", "#2e8b57", "#8a3ab9", "#b8860b", "#5f6b7a")


def _x(score: float) -> float:
    return round(LEFT + max(0.0, min(1.0, score)) * PLOT, 1)


def score_chart(report: Report, summary: Summary) -> str:
    """The SVG element (no XML prolog) for every variant of the summary."""
    height = TOP + ROW * max(1, len(summary.variants)) + 28
    width = LEFT + PLOT + RIGHT
    parts = [
        f'<svg class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        'aria-label="Score distribution per variant">'
    ]
    bottom = TOP + ROW * max(1, len(summary.variants))
    for tick in TICKS:
        x = _x(tick)
        parts.append(f'<line x1="{x}" y1="{TOP}" x2="{x}" y2="{bottom}" class="grid"/>')
        parts.append(f'<text x="{x}" y="{bottom + 18}" class="tick">{tick:g}</text>')
    for index, variant in enumerate(summary.variants):
        colour = COLOURS[index % len(COLOURS)]
        middle = TOP + ROW * index + ROW // 2 - 6
        runs = [
            r
            for r in report.results
            if r.variant == variant.variant and r.judgement is not None and r.error is None
        ]
        scored = [
            (r, r.judgement.score) for r in runs if r.judgement and r.judgement.score is not None
        ]
        parts.append(
            f'<text x="{LEFT - 10}" y="{middle + 4}" class="name">{escape(variant.variant)}</text>'
        )
        failed = variant.judge_failures + variant.consultation_errors
        note = f"n={variant.scored}" + (f", {failed} not scored" if failed else "")
        parts.append(f'<text x="{LEFT + PLOT + 10}" y="{middle + 4}" class="note">{note}</text>')
        scores = sorted(score for _, score in scored)
        if scores:
            parts += _box(scores, middle, colour)
        for n, (run, score) in enumerate(scored):
            jitter = (n * 7) % 5 * 4 - 8  # deterministic spread so equal scores stay visible
            label = escape(f"{run.scenario_id} #{run.repeat + 1}: {score:.2f}")
            parts.append(
                f'<circle cx="{_x(score)}" cy="{middle + jitter}" r="4" fill="{colour}" '
                f'fill-opacity="0.65"><title>{label}</title></circle>'
            )
        if variant.ci_low is not None and variant.ci_high is not None:
            y = middle + 20
            low, high = _x(variant.ci_low), _x(variant.ci_high)
            parts.append(
                f'<line x1="{low}" y1="{y}" x2="{high}" y2="{y}" stroke="{colour}" '
                f'stroke-width="3"><title>mean and 95% interval</title></line>'
            )
            if variant.mean_score is not None:
                mx = _x(variant.mean_score)
                parts.append(
                    f'<rect x="{mx - 3}" y="{y - 5}" width="6" height="10" fill="{colour}"/>'
                )
    parts.append("</svg>")
    return "".join(parts)


def _box(scores: list[float], middle: int, colour: str) -> list[str]:
    q1, median, q3 = (percentile(scores, q) for q in (0.25, 0.5, 0.75))
    low, high = _x(scores[0]), _x(scores[-1])
    return [
        f'<line x1="{low}" y1="{middle}" x2="{high}" y2="{middle}" stroke="{colour}"/>',
        f'<rect x="{_x(q1)}" y="{middle - 12}" width="{max(1.0, _x(q3) - _x(q1)):.1f}" '
        f'height="24" fill="{colour}" fill-opacity="0.12" stroke="{colour}"/>',
        f'<line x1="{_x(median)}" y1="{middle - 12}" x2="{_x(median)}" y2="{middle + 12}" '
        f'stroke="{colour}" stroke-width="2"/>',
    ]
