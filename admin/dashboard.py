"""`/admin/`: the console's front page: the operator's figures for today, the last 7 and
the last 30 UTC days (`core.turns.figures.Figures.stats`), how many rounds the completed
consultations used, the last 30 days one by one as charts drawn on the server
(`admin.charts`), each configured tool server (MCP_SERVERS) with its state and how many
tools it offers (`tool_statuses`, read anew for each view), and whatever further figures
the deployment plugs in (`FigureSource`: on PostgreSQL, the inbox and the workers seen).

With bots stored besides the deployment's own, the page names them: a selector shows
every bot's figures (the default), the deployment's own bot's (`?bot=0`) or one stored
bot's (`?bot=N`) — the same figures `GET /api/stats?bot=N` reads
(`core.turns.figures.Figures.stats` with a scope: a bot's Telegram chats and its API
sessions) — and, on every bot's view, a table gives each bot's last 30 days beside the
total.

Invariants: a handful of aggregate reads per view, whatever the store holds (three
periods' figures and one day-by-day read, plus the source's own few, plus on every bot's
view one period's per bot listed, at most `MAX_BOTS_LISTED`: one bot's figures read the
period's rows, about 12 ms for 5,000 consultations a month on SQLite), none of them waiting
for a running turn. A
`bot` that names no bot stored (removed ones included) is 404 and reads nothing. A source
that fails leaves its section saying so; the rest of the page is still shown.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from admin.charts import Chart, chart
from admin.render import not_found, page
from core.domain.bots import StoredBot
from core.domain.payments import SalesFigures
from core.domain.stats import ROUNDS_TAIL, DayFigures, Stats
from core.domain.tools import ToolServerStatus
from core.turns.figures import Figures
from core.turns.sales_figures import StarsFigures

log = logging.getLogger(__name__)

PERIODS = ((1, "Today"), (7, "7 days"), (30, "30 days"))
SERIES_DAYS = 30
MAX_BOTS_LISTED = 20
"""Stored bots the per-bot table and the selector name (the first by id); a deployment
with more still has every bot's total and `?bot=N` for any of them."""
OWN_BOT = "This deployment's bot"
"""How the page names scope 0: TELEGRAM_BOT_TOKEN's bot, and the API without `bot`."""

StoredBots = Callable[[], Awaitable[Sequence[StoredBot]]]
"""The bots stored besides the deployment's own, not removed (`BotKeeping.bots`)."""


async def no_stored_bots() -> Sequence[StoredBot]:
    return ()


@dataclass(frozen=True, slots=True)
class BotChoice:
    """One entry of the bot selector: its query (`?bot=…`, "" for every bot), its name,
    and whether it is the one shown."""

    query: str
    name: str
    current: bool


@dataclass(frozen=True, slots=True)
class BotRow:
    """One bot's last 30 days in the per-bot table (the total's row too)."""

    name: str
    query: str
    started: str
    completed: str
    people: str
    tokens: str
    cost: str


@dataclass(frozen=True, slots=True)
class Figure:
    """One number on the dashboard: what it counts, its value as shown, a note (the
    period, or what it leaves out)."""

    title: str
    value: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class FigureTable:
    """A small table under a section's figures: its rows as shown, `empty` when none."""

    title: str
    headings: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    empty: str = "None."


@dataclass(frozen=True, slots=True)
class FigureSection:
    """Figures a deployment adds to the dashboard, under a heading of their own."""

    title: str
    figures: tuple[Figure, ...] = ()
    tables: tuple[FigureTable, ...] = ()
    note: str = ""


class FigureSource(Protocol):
    """What a deployment plugs in: its sections, read anew for each view (a few cheap
    reads; an exception leaves the section saying it could not be read)."""

    title: str

    async def sections(self) -> Sequence[FigureSection]: ...


@dataclass(frozen=True, slots=True)
class Share:
    """One period's cell of the rounds table: the count and its share of the period's
    completed consultations as shown, and the bar's length (0 to 100)."""

    text: str
    percent: float


ToolStatuses = Callable[[], Sequence[ToolServerStatus]]
"""Where each configured tool server stands now (the composition root's toolbox)."""


def no_tool_servers() -> Sequence[ToolServerStatus]:
    return ()


def tools_section(statuses: Sequence[ToolServerStatus]) -> FigureSection:
    """The tool servers as the dashboard shows them: one row each."""
    ready = sum(1 for s in statuses if s.state == "ready")
    return FigureSection(
        "Tool servers",
        figures=(
            Figure("servers ready", f"{ready:,} of {len(statuses):,}"),
            Figure("tools offered", f"{sum(s.tools for s in statuses if s.state == 'ready'):,}"),
        ),
        tables=(
            FigureTable(
                "Servers",
                ("Server", "State", "Tools", "Last error"),
                tuple((s.name, s.state, f"{s.tools:,}", s.error or "—") for s in statuses),
            ),
        ),
        note="MCP_SERVERS. A server that is not ready leaves consultations without its "
        "tools; the bot goes on answering.",
    )


def sales_section(sold: SalesFigures) -> FigureSection:
    """The plans sold in Stars over the series' days: the Stars kept, the payments, the
    plans active now, and each day with a payment."""
    return FigureSection(
        f"Telegram Stars, the last {SERIES_DAYS} days",
        figures=(
            Figure("Stars kept (refunds taken off)", f"{sold.stars:,}"),
            Figure("payments", f"{sold.payments:,}"),
            Figure("plans active now", f"{sold.active_plans:,}"),
        ),
        tables=(
            FigureTable(
                "By day",
                ("Day", "Payments", "Stars", "Refunded"),
                tuple(
                    (d.day, f"{d.payments:,}", f"{d.stars:,}", f"{d.refunded_stars:,}")
                    for d in reversed(sold.days)
                ),
            ),
        ),
        note="Every bot's plans (PLANS and stored bots' own); see Payments for each one.",
    )


class Dashboard:
    def __init__(
        self,
        figures: Figures,
        source: FigureSource | None = None,
        tool_statuses: ToolStatuses = no_tool_servers,
        stars: StarsFigures | None = None,
        bots: StoredBots = no_stored_bots,
    ) -> None:
        """`stars`: the figures of plans sold in Stars (a section of their own whenever
        there are any; None: never); `bots`: the bots stored besides the deployment's own
        (none by default)."""
        self._figures = figures
        self._source = source
        self._tool_statuses = tool_statuses
        self._stars = stars
        self._bots = bots

    async def show(self, request: web.Request) -> web.StreamResponse:
        stored = sorted(await self._bots(), key=lambda bot: bot.id)
        try:
            scope = _scope(request.query.getall("bot", []), stored)
        except LookupError:
            return not_found(request, "No such bot: pick one of the bots listed.")
        periods = [await self._figures.stats(days, scope=scope) for days, _ in PERIODS]
        days = await self._figures.daily_stats(SERIES_DAYS, scope=scope)
        sections = await self._sections(scope)
        listed = stored[:MAX_BOTS_LISTED]
        by_bot = await self._by_bot(listed, periods[-1]) if scope is None else []
        return page(
            request,
            "dashboard.html",
            choices=choices(listed, scope) if stored else [],
            shown=_bot_name(scope, stored),
            by_bot=by_bot if stored else [],
            more_bots=len(stored) - len(listed),
            headings=[name for _, name in PERIODS],
            rows=table(periods),
            models=models(periods),
            unpriced=sorted({m for s in periods for m in s.unpriced}),
            rounds=rounds_rows(periods),
            tail=f"{ROUNDS_TAIL:,}",
            charts=charts(days),
            sections=sections,
        )

    async def _by_bot(self, listed: Sequence[StoredBot], total: Stats) -> list[BotRow]:
        """The last 30 days of the deployment's own bot, of each bot `listed`, and of all
        (`total`, already read) — each read as `GET /api/stats?bot=N` reads it."""
        if not listed:
            return []
        rows = [bot_row(OWN_BOT, "0", await self._figures.stats(SERIES_DAYS, scope=0))]
        for bot in listed:
            figures = await self._figures.stats(SERIES_DAYS, scope=bot.id)
            rows.append(bot_row(_stored_name(bot), str(bot.id), figures))
        return [*rows, bot_row("All bots", "", total)]

    async def _sections(self, scope: int | None) -> Sequence[FigureSection]:
        """The Stars sold (of the bot shown, or all), the tool servers, what is plugged in."""
        stars = self._stars
        sold = None if stars is None else await stars.figures(SERIES_DAYS, scope=scope)
        sales = () if sold is None else (sales_section(sold),)
        return (*sales, *self._tools(), *(await self._plugged()))

    def _tools(self) -> Sequence[FigureSection]:
        """The tool servers' section; none without tool servers."""
        try:
            statuses = self._tool_statuses()
        except Exception as exc:  # extra figures: the page still shows
            log.warning("dashboard: the tool servers could not be read: %s", exc)
            return (FigureSection("Tool servers", note=f"Could not be read: {exc}"),)
        return (tools_section(statuses),) if statuses else ()

    async def _plugged(self) -> Sequence[FigureSection]:
        if self._source is None:
            return ()
        try:
            return await self._source.sections()
        except Exception as exc:  # the deployment's figures are extra: the page still shows
            log.warning("dashboard: %s could not be read: %s", self._source.title, exc)
            return (FigureSection(self._source.title, note=f"Could not be read: {exc}"),)


def _scope(given: Sequence[str], stored: Sequence[StoredBot]) -> int | None:
    """The bot `?bot=` names: None for every bot (no `bot`, or empty), 0 for the
    deployment's own, a stored bot's id; LookupError for anything else."""
    if not given or given == [""]:
        return None
    raw = given[0]
    if len(given) > 1 or not (raw.isascii() and raw.isdigit()) or len(raw) > 19:
        raise LookupError(raw)
    if raw == "0":
        return 0
    if raw.startswith("0") or not any(bot.id == int(raw) for bot in stored):
        raise LookupError(raw)
    return int(raw)


def _stored_name(bot: StoredBot) -> str:
    name = f"#{bot.id} {bot.handle}"
    return f"{name} ({bot.label})" if bot.label else name


def _bot_name(scope: int | None, stored: Sequence[StoredBot]) -> str:
    if scope is None:
        return "All bots"
    if scope == 0:
        return OWN_BOT
    return next(_stored_name(bot) for bot in stored if bot.id == scope)


def choices(listed: Sequence[StoredBot], scope: int | None) -> list[BotChoice]:
    """The selector: every bot, the deployment's own, then each bot listed."""
    return [
        BotChoice("", "All bots", scope is None),
        BotChoice("0", OWN_BOT, scope == 0),
        *(BotChoice(str(bot.id), _stored_name(bot), scope == bot.id) for bot in listed),
    ]


def bot_row(name: str, query: str, stats: Stats) -> BotRow:
    """One row of the per-bot table from a period's figures."""
    return BotRow(
        name,
        query,
        f"{stats.started:,}",
        f"{stats.completed:,}",
        f"{stats.people:,}",
        f"{stats.prompt_tokens:,} / {stats.completion_tokens:,}",
        f"${stats.cost:,.4f}",
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


def rounds_rows(periods: Sequence[Stats]) -> list[tuple[str, list[Share]]]:
    """The rounds table: (rounds used, one `Share` per period), from 1 round up to the
    highest bucket counted in any period (0 rounds first, when counted); empty when no
    period completed anything."""
    counted = [b.rounds for s in periods for b in s.rounds_counted]
    if not counted:
        return []
    highest = max(counted)
    labels = [b for b in periods[-1].rounds if b.rounds <= highest and (b.rounds or b.count)]
    rows = []
    for bucket in labels:
        shares = []
        for stats in periods:
            found = next((b for b in stats.rounds if b.rounds == bucket.rounds), None)
            count = found.count if found is not None else 0
            share = (stats.rounds_share(found) if found is not None else None) or 0.0
            text = f"{count:,}" if not count else f"{count:,} · {share:.0%}"
            shares.append(Share(text, round(min(share, 1.0) * 100, 1)))
        rows.append((bucket.label, shares))
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
