"""/usage in Telegram: the sender's model usage today and this month (UTC), and who a
turn's usage is charged to.

Invariants:
- a Telegram turn is charged to its sender as `core.domain.facts` names people
  (`tg:<user id>`); a message written as the group itself (an anonymous admin) or with no
  sender is charged to its chat only, and /usage tells such a sender nothing;
- /usage takes no arguments (any given are ignored): it shows only the sender's own
  totals, whatever chat it is sent in, their tool calls by tool (today and this month,
  when they made any), and what is left of each limit that applies to them
  (`bot.commands.quota.left_lines`).
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.commands.quota import left_lines
from bot.transport.chat import Context, Incoming
from bot.transport.say import Say
from core.domain.tool_usage import UNKNOWN, ToolCalls, ToolCount, shown_tool
from core.domain.usage import Payer, ScopeKind, UsageSummary
from core.turns.engine import Engine
from i18n.translate import t


def payer_of(incoming: Incoming) -> Payer:
    """Who a turn from `incoming` is charged to beyond its chat."""
    if incoming.user_id is None or incoming.anonymous_admin:
        return Payer()
    return Payer(person=incoming.person(incoming.user_id))


def money(cost: float) -> str:
    """A cost in the prices' unit: cents and up with two decimals, less with four."""
    return f"${cost:.2f}" if cost >= 1 else f"${cost:.4f}"


def summary_text(language: str, summary: UsageSummary) -> str:
    line = t(
        language,
        "usage_line",
        prompt=summary.prompt_tokens,
        completion=summary.completion_tokens,
        cost=money(summary.cost),
    )
    if summary.estimated:
        line += t(language, "usage_estimated")
    if summary.unpriced:
        line += t(language, "usage_unpriced", models=", ".join(summary.unpriced))
    return line


def tool_count_text(language: str, count: ToolCount) -> str:
    """`time · get_current_time 3 (1 failed)`; calls to tools no toolbox offered under one
    translated name."""
    name = t(language, "usage_tool_unknown") if count.tool == UNKNOWN else shown_tool(count.tool)
    if count.failed:
        return t(language, "usage_tool_failed", tool=name, calls=count.calls, failed=count.failed)
    return f"{name} {count.calls}"


def tools_lines(language: str, tools: ToolCalls) -> list[str]:
    """The lines "Tool calls today: …" and "Tool calls this month: …", each only when
    there were any."""
    lines = []
    for key, counts in (("usage_tools_today", tools.today), ("usage_tools_month", tools.month)):
        if counts:
            lines.append(t(language, key, tools=tool_counts_text(language, counts)))
    return lines


def tool_counts_text(language: str, counts: Sequence[ToolCount]) -> str:
    """`time · get_current_time 3, docs · search 1 (1 failed)` in the reader's language."""
    return ", ".join(tool_count_text(language, count) for count in counts)


class UsageCommand:
    """/usage."""

    def __init__(self, engine: Engine, *, say: Say) -> None:
        self.engine = engine
        self.say = say

    async def usage(self, incoming: Incoming, context: Context) -> None:
        """Show the sender's tokens, cost and tool calls today and this month."""
        language = incoming.language
        person = payer_of(incoming).person
        if person is None:
            await self.say(incoming, t(language, "usage_unknown"))
            return
        report = await self.engine.figures.usage(ScopeKind.PERSON, person)
        text = t(
            language,
            "usage_report",
            today=summary_text(language, report.today),
            month=summary_text(language, report.month),
        )
        tools = tools_lines(language, report.tools)
        left = left_lines(await self.engine.quotas.of_person(person), language)
        await self.say(incoming, "\n".join([text, *tools, *left]))
