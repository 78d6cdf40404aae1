"""/stats in Telegram: the operator's figures for today and the last 7 days (UTC).

Invariants:
- only a user named in ADMIN_USER_IDS gets figures, and only in a private chat: anyone
  else is refused in their language; in a group everyone gets the same refusal, so it
  reveals neither figures nor who the operators are;
- /stats takes no arguments (any given are ignored);
- in the deployment's own bot the figures are every bot's, followed — when bots are stored
  besides it — by each bot's last 7 days (this bot's first, then at most `MAX_BOTS_LISTED`
  stored bots by id), read as `GET /api/stats?bot=N` reads them; in bot n they are its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from bot.commands.usage import money, tool_counts_text
from bot.transport.chat import Context, Incoming
from bot.transport.config import BotConfig
from bot.transport.say import Say
from core.domain.bots import StoredBot
from core.domain.stats import Stats
from core.turns.figures import Figures
from core.turns.sales_figures import StarsFigures
from i18n.translate import t

WEEK = 7
NONE = "—"  # a figure with nothing to count: a symbol, the same in every language
MAX_BOTS_LISTED = 20
"""Stored bots the deployment's bot's /stats lists (the console's dashboard lists more)."""
StoredBots = Callable[[], Awaitable[Sequence[StoredBot]]]
"""The bots stored besides the deployment's own, not removed (the store's `bots`)."""


def duration(language: str, seconds: float | None) -> str:
    """Seconds as a phone-short duration: `45 s`, `10 min 30 s`, `2 h 5 min`."""
    if seconds is None:
        return NONE
    whole = round(seconds)
    if whole < 60:
        return t(language, "stats_seconds", s=whole)
    if whole < 3600:
        return t(language, "stats_minutes", m=whole // 60, s=whole % 60)
    return t(language, "stats_hours", h=whole // 3600, m=whole % 3600 // 60)


def rounds_used(stats: Stats) -> str:
    """The rounds buckets completed consultations fell in, each with its count and share of
    the completed ones: `1 — 12 (30%) · 2 — 20 (50%) · 10+ — 1 (3%)`. Numbers and symbols
    only, so the same in every language."""
    shown = []
    for bucket in stats.rounds_counted:
        share = stats.rounds_share(bucket)
        percent = "" if share is None else f" ({share:.0%})"
        shown.append(f"{bucket.label} — {bucket.count}{percent}")
    return " · ".join(shown)


def stats_text(language: str, stats: Stats, title: str) -> str:
    """One period's figures, a short line each."""
    rate = NONE if stats.completion_rate is None else f"{stats.completion_rate:.0%}"
    rounds = NONE if stats.mean_rounds is None else f"{stats.mean_rounds:.1f}"
    lines = [
        title,
        t(language, "stats_people", people=stats.people),
        t(
            language,
            "stats_consultations",
            started=stats.started,
            completed=stats.completed,
            reset=stats.reset,
            expired=stats.expired,
        ),
        t(language, "stats_completion", rate=rate, ended=stats.ended),
        t(
            language,
            "stats_rounds",
            rounds=rounds,
            early=stats.early_finishes,
            follow_ups=stats.follow_ups,
        ),
    ]
    if stats.rounds_counted:
        lines.append(t(language, "stats_rounds_used", buckets=rounds_used(stats)))
    lines.append(
        t(
            language,
            "stats_times",
            median=duration(language, stats.answer_seconds_median),
            p95=duration(language, stats.answer_seconds_p95),
        )
    )
    if not stats.usage:
        lines.append(t(language, "stats_no_calls"))
        return "\n".join(lines)
    lines.append(t(language, "stats_models"))
    for usage in stats.usage:
        line = t(
            language,
            "stats_model",
            model=usage.model,
            prompt=usage.prompt_tokens,
            completion=usage.completion_tokens,
            cost=money(usage.cost),
        )
        if usage.estimated_calls:
            line += t(language, "usage_estimated")
        if usage.model in stats.unpriced:
            line += t(language, "stats_unpriced")
        lines.append(line)
    lines.append(
        t(
            language,
            "stats_total",
            prompt=stats.prompt_tokens,
            completion=stats.completion_tokens,
            cost=money(stats.cost),
        )
    )
    if stats.tools:
        lines.append(t(language, "stats_tools", tools=tool_counts_text(language, stats.tools)))
    return "\n".join(lines)


class StatsCommand:
    """/stats: in the deployment's own bot (scope 0) everyone's figures, as before bots had
    scopes, and each bot's; in bot n its own (`core.domain.telegram_keys`)."""

    def __init__(
        self,
        figures: Figures,
        config: BotConfig,
        *,
        say: Say,
        stars: StarsFigures | None = None,
        bots: StoredBots | None = None,
    ) -> None:
        """`stars`: the figures of plans sold in Stars (they follow whenever there are any;
        None: never); `bots`: the bots stored besides the deployment's own (None: none
        listed)."""
        self.figures = figures
        self.scope = config.scope or None
        self.admins = config.admin_user_ids
        self.say = say
        self.stars = stars
        self.bots = bots if self.scope is None else None

    async def stats(self, incoming: Incoming, context: Context) -> None:
        """Show an operator today's and the last 7 days' figures."""
        language = incoming.language
        if incoming.is_group:
            await self.say(incoming, t(language, "stats_private_only"))
            return
        if incoming.user_id is None or incoming.user_id not in self.admins:
            await self.say(incoming, t(language, "stats_refused"))
            return
        today = await self.figures.stats(1, scope=self.scope)
        week = await self.figures.stats(WEEK, scope=self.scope)
        titles = (
            t(language, "stats_today", day=today.until_day),
            t(language, "stats_days", days=WEEK, since=week.since_day, until=week.until_day),
        )
        sales = await self._sales_text(language)
        await self.say(
            incoming,
            "\n\n".join(
                [
                    stats_text(language, today, titles[0]),
                    stats_text(language, week, titles[1]),
                    *await self._by_bot(language),
                    *([] if sales is None else [sales]),
                ]
            ),
        )

    async def _by_bot(self, language: str) -> list[str]:
        """Each bot's last 7 days, this bot's first; nothing without stored bots."""
        stored = sorted(await self.bots(), key=lambda bot: bot.id) if self.bots else []
        if not stored:
            return []
        listed = stored[:MAX_BOTS_LISTED]
        named = [(t(language, "stats_this_bot"), 0)]
        named += [(f"#{bot.id} {bot.handle}", bot.id) for bot in listed]
        lines = [t(language, "stats_by_bot", days=WEEK)]
        for name, scope in named:
            week = await self.figures.stats(WEEK, scope=scope)
            lines.append(
                t(
                    language,
                    "stats_bot",
                    bot=name,
                    started=week.started,
                    completed=week.completed,
                    cost=money(week.cost),
                )
            )
        if len(stored) > len(listed):
            lines.append(t(language, "stats_more_bots", count=len(stored) - len(listed)))
        return ["\n".join(lines)]

    async def _sales_text(self, language: str) -> str | None:
        """The Stars kept over the week, day by day, and the plans active now; None when
        no bot sells plans and none was paid for or is active."""
        sold = None if self.stars is None else await self.stars.figures(WEEK, scope=self.scope)
        if sold is None:
            return None
        lines = [
            t(
                language,
                "stats_stars",
                days=WEEK,
                stars=sold.stars,
                payments=sold.payments,
                plans=sold.active_plans,
            )
        ]
        lines += [f"{day.day}: {day.stars - day.refunded_stars} ⭐" for day in sold.days]
        return "\n".join(lines)
