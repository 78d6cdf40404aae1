"""Day-by-day charts drawn on the server as SVG geometry (no script, no style attribute:
the CSP allows neither inline; colours come from classes in admin.css).

Invariants: every shape lies inside the chart's `WIDTH` × `HEIGHT` box whatever the
values (all zero included: nothing divides by zero); each day is one slot of equal width,
oldest on the left; bars of one day stack in the order their series are given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 600
HEIGHT = 160
TOP = 8  # room above the tallest bar
BOTTOM = 18  # room below the baseline for the first and last days' names
PLOT = HEIGHT - TOP - BOTTOM


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    series: str  # the CSS class of its colour
    title: str  # shown on hover: the day and the value


@dataclass(frozen=True, slots=True)
class Chart:
    """What a template draws: stacked bars, a line (SVG polyline points), its top value."""

    title: str
    bars: tuple[Bar, ...]
    line: str
    line_series: str
    top: str  # the value at the top of the scale, as shown
    first_day: str
    last_day: str
    legend: tuple[tuple[str, str], ...]  # (CSS class, name)
    width: int = WIDTH
    height: int = HEIGHT
    baseline: int = TOP + PLOT  # the y of the zero line


def chart(
    title: str,
    days: Sequence[str],
    stacks: Sequence[tuple[str, str, Sequence[float]]],
    line: tuple[str, str, Sequence[float]] | None = None,
    *,
    shown: type[int] | type[float] = int,
) -> Chart:
    """`stacks`: (CSS class, name, one value per day) stacked bottom up; `line`: one more
    series drawn as a line on the same scale."""
    count = max(len(days), 1)
    slot = WIDTH / count
    totals = [sum(values[i] for _, _, values in stacks) for i in range(len(days))]
    line_values = list(line[2]) if line is not None else []
    top = max([*totals, *line_values, 0])
    scale = PLOT / top if top > 0 else 0.0
    baseline = TOP + PLOT
    bars: list[Bar] = []
    for i, day in enumerate(days):
        y = float(baseline)
        for series, name, values in stacks:
            height = values[i] * scale
            if height <= 0:
                continue
            y -= height
            bars.append(
                Bar(
                    i * slot + slot * 0.1,
                    y,
                    slot * 0.8,
                    height,
                    series,
                    f"{day}: {_fmt(values[i], shown)} {name}",
                )
            )
    points = " ".join(
        f"{i * slot + slot / 2:.1f},{baseline - value * scale:.1f}"
        for i, value in enumerate(line_values)
    )
    legend = tuple((series, name) for series, name, _ in stacks)
    if line is not None:
        legend += ((line[0], line[1]),)
    return Chart(
        title=title,
        bars=tuple(bars),
        line=points,
        line_series=line[0] if line is not None else "",
        top=_fmt(top, shown),
        first_day=days[0] if days else "",
        last_day=days[-1] if days else "",
        legend=legend,
    )


def _fmt(value: float, shown: type[int] | type[float]) -> str:
    return f"{value:,.0f}" if shown is int else f"{value:,.4f}"
