"""`/admin/`: the console's front page: the operator's figures for today, the last 7 and
the last 30 UTC days (`ConsultationService.stats`), the last 30 days one by one as
charts drawn on the server (`admin.charts`), and whatever further figures the deployment
plugs in (`FigureSource`).

Invariant: a handful of aggregate reads per view, whatever the store holds (three
periods' figures and one day-by-day read), none of them waiting for a running turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from admin.charts import Chart, chart
from admin.render import page
from core.service import ConsultationService
from core.stats import DayFigures, Stats

PERIODS = ((1, "Today"), (7, "7 days"), (30, "30 days"))
SERIES_DAYS = 30


@dataclass(frozen=True, slots=True)
class Figure:
    """One number on the dashboard: what it counts, its value as shown, a note (the
    period, or what it leaves out)."""

    title: str
    value: str
    note: str = ""


class FigureSource(Protocol):
    async def figures(self) -> Sequence[Figure]: ...


class Dashboard:
    def __init__(self, service: ConsultationService, source: FigureSource | None = None) -> None:
        self._service = service
        self._source = source

    async def show(self, request: web.Request) -> web.StreamResponse:
        periods = [await self._service.stats(days) for days, _ in PERIODS]
        days = await self._service.daily_stats(SERIES_DAYS)
        figures = await self._source.figures() if self._source is not None else ()
        return page(
            request,
            "dashboard.html",
            headings=[name for _, name in PERIODS],
            rows=table(periods),
            models=models(periods),
            unpriced=sorted({m for s in periods for m in s.unpriced}),
            charts=charts(days),
            figures=figures,
        )


def table(periods: Sequence[Stats]) -> list[tuple[str, list[str]]]:
    """The figures' rows: (what, one value per period)."""

    def row(title: str, shown: object) -> tuple[str, list[str]]:
        return title, [shown(s) for s in periods]  # type: ignore[operator]

    return [
        row("People", lambda s: f"{s.people:,}"),
        row("Started", lambda s: f"{s.started:,}"),
        row("Completed", lambda s: f"{s.completed:,}"),
        row("Reset", lambda s: f"{s.reset:,}"),
        row("Expired", lambda s: f"{s.expired:,}"),
        row("Completion rate", lambda s: _percent(s.completion_rate)),
        row("Mean rounds", lambda s: "—" if s.mean_rounds is None else f"{s.mean_rounds:.1f}"),
        row("Early finishes", lambda s: f"{s.early_finishes:,}"),
        row("Follow-ups", lambda s: f"{s.follow_ups:,}"),
        row("Tokens in / out", lambda s: f"{s.prompt_tokens:,} / {s.completion_tokens:,}"),
        row("Cost", lambda s: f"${s.cost:,.4f}"),
        row("Time to final, median", lambda s: _duration(s.answer_seconds_median)),
        row("Time to final, p95", lambda s: _duration(s.answer_seconds_p95)),
    ]


def models(periods: Sequence[Stats]) -> list[tuple[str, list[str]]]:
    """Tokens and cost by model: (model, "tokens · cost" per period), the costliest of the
    longest period first."""
    names = [u.model for u in periods[-1].usage]
    for stats in periods:
        names += [u.model for u in stats.usage if u.model not in names]
    rows = []
    for name in names:
        cells = []
        for stats in periods:
            found = next((u for u in stats.usage if u.model == name), None)
            cells.append(
                "—"
                if found is None
                else f"{found.prompt_tokens + found.completion_tokens:,} · ${found.cost:,.4f}"
            )
        rows.append((name, cells))
    return rows


def charts(days: Sequence[DayFigures]) -> list[Chart]:
    names = [d.day for d in days]
    return [
        chart(
            "Consultations per day",
            names,
            [
                ("completed", "completed", [d.completed for d in days]),
                ("reset", "reset", [d.reset for d in days]),
                ("expired", "expired", [d.expired for d in days]),
            ],
            ("started", "started", [d.started for d in days]),
        ),
        chart(
            "Tokens per day",
            names,
            [
                ("prompt", "tokens in", [d.prompt_tokens for d in days]),
                ("completion", "tokens out", [d.completion_tokens for d in days]),
            ],
        ),
        chart("Cost per day (USD)", names, [("cost", "USD", [d.cost for d in days])], shown=float),
    ]


def _percent(rate: float | None) -> str:
    return "—" if rate is None else f"{rate:.0%}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
