"""/stats at the terminal: the deployment's figures for today and the last 7 UTC days (or
the last N with `/stats N`), as the operator at the terminal sees the whole store.

Invariant: an argument that is not a number of days from 1 to `core.domain.stats.MAX_DAYS` reads
nothing and says so.
"""

from __future__ import annotations

from core.domain.stats import MAX_DAYS, Stats
from core.turns.engine import Engine
from terminal.usage import tools_line

WEEK = 7


def _or_dash(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def _rounds_used(stats: Stats) -> list[str]:
    """The line of rounds buckets completed consultations fell in, with counts and shares
    (`1 — 12 (30%), 2 — 20 (50%)`); none when nothing completed."""
    shown = []
    for bucket in stats.rounds_counted:
        share = stats.rounds_share(bucket)
        percent = "" if share is None else f" ({share:.0%})"
        shown.append(f"{bucket.label} — {bucket.count}{percent}")
    return [f"  rounds used: {', '.join(shown)}"] if shown else []


def stats_lines(title: str, stats: Stats) -> list[str]:
    rate = _or_dash(stats.completion_rate, "{:.0%}")
    lines = [
        f"[{title}, {stats.since_day} to {stats.until_day} UTC]",
        f"  people {stats.people}; consultations: {stats.started} started, "
        f"{stats.completed} completed, {stats.reset} reset, {stats.expired} expired",
        f"  completed {rate} of {stats.ended} ended; mean rounds "
        f"{_or_dash(stats.mean_rounds, '{:.1f}')}; early finishes {stats.early_finishes}; "
        f"follow-ups {stats.follow_ups}",
        *_rounds_used(stats),
        f"  time to final answer: median {_or_dash(stats.answer_seconds_median, '{:.0f} s')}, "
        f"95th percentile {_or_dash(stats.answer_seconds_p95, '{:.0f} s')}",
    ]
    for usage in stats.usage:
        unpriced = " (no price)" if usage.model in stats.unpriced else ""
        lines.append(
            f"  {usage.model}: {usage.prompt_tokens} tokens in, {usage.completion_tokens} out,"
            f" ${usage.cost:.4f}{unpriced}"
        )
    lines.append(
        f"  total: {stats.prompt_tokens} tokens in, {stats.completion_tokens} out,"
        f" ${stats.cost:.4f}"
    )
    if stats.tools:
        lines.append(f"  tool calls: {tools_line(stats.tools)}")
    return lines


async def stats_command(engine: Engine, argument: str) -> None:
    """Print today's figures and the last 7 (or N) days'."""
    argument = argument.strip()
    days = WEEK
    if argument:
        if not (argument.isascii() and argument.isdigit() and 1 <= int(argument) <= MAX_DAYS):
            print(f"[usage: /stats [N], N days from 1 to {MAX_DAYS}]")
            return
        days = int(argument)
    lines = stats_lines("today", await engine.figures.stats(1))
    lines += stats_lines(f"last {days} days", await engine.figures.stats(days))
    print("\n".join(lines))
