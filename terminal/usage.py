"""/usage at the terminal: the model usage of its chat today and this month.

Invariant: the terminal is one person in one chat, so its usage is its chat key's
(`ScopeKind.CHAT`): every reply the terminal stores is charged to it.
"""

from __future__ import annotations

from core.domain.usage import ScopeKind, UsageSummary
from core.turns.engine import Engine


def summary_line(summary: UsageSummary) -> str:
    line = (
        f"{summary.prompt_tokens} tokens in, {summary.completion_tokens} out, ${summary.cost:.4f}"
    )
    if summary.estimated:
        line += " (estimated)"
    if summary.unpriced:
        line += f"; no price for model {', '.join(summary.unpriced)}"
    return line


async def usage_command(engine: Engine, key: str) -> None:
    """Print today's and this month's tokens and cost (UTC days)."""
    report = await engine.figures.usage(ScopeKind.CHAT, key)
    print(f"[today: {summary_line(report.today)}]")
    print(f"[this month: {summary_line(report.month)}]")
