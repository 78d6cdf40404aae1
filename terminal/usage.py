"""/usage at the terminal: the model usage of its chat today and this month, and its tool
calls by tool when it made any.

Invariant: the terminal is one person in one chat, so its usage is its chat key's
(`ScopeKind.CHAT`): every reply the terminal stores is charged to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.domain.tool_usage import UNKNOWN, ToolCount, shown_tool
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


def tools_line(counts: Sequence[ToolCount]) -> str:
    """`time · get_current_time 3 (1 failed), unknown tools 1`."""
    shown = []
    for count in counts:
        name = "unknown tools" if count.tool == UNKNOWN else shown_tool(count.tool)
        failed = f" ({count.failed} failed)" if count.failed else ""
        shown.append(f"{name} {count.calls}{failed}")
    return ", ".join(shown)


async def usage_command(engine: Engine, key: str) -> None:
    """Print today's and this month's tokens and cost (UTC days), and tool calls."""
    report = await engine.figures.usage(ScopeKind.CHAT, key)
    print(f"[today: {summary_line(report.today)}]")
    print(f"[this month: {summary_line(report.month)}]")
    if report.tools.today:
        print(f"[tool calls today: {tools_line(report.tools.today)}]")
    if report.tools.month:
        print(f"[tool calls this month: {tools_line(report.tools.month)}]")
