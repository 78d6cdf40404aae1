"""/usage in Telegram: the sender's model usage today and this month (UTC), and who a
turn's usage is charged to.

Invariants:
- a Telegram turn is charged to its sender as `core.domain.facts` names people
  (`tg:<user id>`); a message written as the group itself (an anonymous admin) or with no
  sender is charged to its chat only, and /usage tells such a sender nothing;
- /usage takes no arguments (any given are ignored): it shows only the sender's own
  totals, whatever chat it is sent in, and what is left of each limit that applies to
  them (`bot.commands.quota.left_lines`).
"""

from __future__ import annotations

from bot.commands.quota import left_lines
from bot.transport.chat import Context, Incoming
from bot.transport.say import Say
from core.domain.facts import telegram_person
from core.domain.usage import Payer, ScopeKind, UsageSummary
from core.turns.engine import Engine
from i18n.translate import t


def payer_of(incoming: Incoming) -> Payer:
    """Who a turn from `incoming` is charged to beyond its chat."""
    if incoming.user_id is None or incoming.anonymous_admin:
        return Payer()
    return Payer(person=telegram_person(incoming.user_id))


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


class UsageCommand:
    """/usage."""

    def __init__(self, engine: Engine, *, say: Say) -> None:
        self.engine = engine
        self.say = say

    async def usage(self, incoming: Incoming, context: Context) -> None:
        """Show the sender's tokens and cost today and this month."""
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
        left = left_lines(await self.engine.quotas.of_person(person), language)
        await self.say(incoming, "\n".join([text, *left]))
