"""Quotas in Telegram: the refusal and final-answer notes in the user's language, what is
left of each limit (for /usage), and /quota, the operators' per-person overrides.

Invariants:
- /quota answers only a user in ADMIN_USER_IDS writing in a private chat: anyone else gets
  the not-allowed answer, an operator in a group is told to use a private chat; nothing
  is read or changed for them.
- Only arguments shaped exactly as documented change anything: a positive Telegram user
  id of 1–19 ASCII digits or an HTTP API user as `api:<userId>` (the person its requests'
  `userId` names) or `api<n>:<userId>` (stored bot n's, read by
  `core.domain.api_keys.named_person`), then nothing (show), `off`, `default`, or a token
  count of 1–10 ASCII digits within `MAX_OVERRIDE_TOKENS`; anything else gets the usage
  text, which names the forms a person is given in.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from bot.commands.refusals import Refusals
from bot.transport.chat import Context, Incoming
from bot.transport.say import Say
from core.domain.api_keys import named_person
from core.domain.facts import telegram_person
from core.domain.quotas import MAX_OVERRIDE_TOKENS, Limit, PersonQuota, QuotaHit
from core.turns.quota_checks import Quotas
from i18n.translate import t

_USER_ID = re.compile(r"[0-9]{1,19}")
_TOKENS = re.compile(r"[0-9]{1,10}")
_MAX_USER_ID = 2**63 - 1


def when(timestamp: float) -> str:
    """A reset time as users read it (UTC)."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M")


def limit_text(hit: QuotaHit, language: str) -> str:
    return t(language, f"quota_{hit.limit.value}", allowed=hit.allowed)


def refused_text(hit: QuotaHit, language: str, *, offer_plans: bool = False) -> str:
    """What a person over a limit reads instead of an answer; with `offer_plans` (plans
    are on sale) a person's limit points to /plans."""
    text = t(language, "quota_refused", limit=limit_text(hit, language), resets=when(hit.resets_at))
    if offer_plans and hit.limit is not Limit.API_DAILY_TOKENS:
        text += "\n" + t(language, "quota_offer_plans")
    return text


def final_text(hit: QuotaHit, language: str) -> str:
    """The note under an answer that was made final by a limit."""
    return t(language, "quota_final", limit=limit_text(hit, language), resets=when(hit.resets_at))


def left_lines(quota: PersonQuota, language: str) -> list[str]:
    """What is left of each limit that applies; exempt people are told they have none."""
    limits, standing = quota.limits, quota.standing
    if limits.exempt:
        return [t(language, "usage_no_limit")]
    lines = []
    for key, allowed, used in (
        ("usage_left_day", limits.daily_tokens, standing.tokens_today),
        ("usage_left_month", limits.monthly_tokens, standing.tokens_month),
        ("usage_left_consultations", limits.daily_consultations, standing.consultations_today),
    ):
        if allowed:
            lines.append(t(language, key, left=max(allowed - used, 0), allowed=allowed))
    return lines


class QuotaCommand:
    """/quota <user id> [<daily tokens>|off|default]."""

    def __init__(
        self,
        quotas: Quotas,
        *,
        say: Say,
        refuse: Refusals,
        admin_user_ids: frozenset[int],
    ) -> None:
        self.quotas = quotas
        self.say = say
        self.refuse = refuse
        self.admins = admin_user_ids

    async def command(self, incoming: Incoming, context: Context) -> None:
        """Show, set or remove a person's quota override (operators, in private)."""
        language = incoming.language
        if incoming.user_id not in self.admins or incoming.anonymous_admin:
            await self.refuse(incoming, t(language, "not_allowed"))
            return
        if incoming.is_group:
            await self.say(incoming, t(language, "quota_private_only"))
            return
        args = context.args or []
        user = args[0] if args else ""
        person = person_named(user, incoming.scope)
        if len(args) not in (1, 2) or person is None:
            await self.say(incoming, help_text(language))
            return
        quotas = self.quotas
        if len(args) == 1:
            await self.say(incoming, show_text(await quotas.of_person(person), user, language))
            return
        value = args[1].lower()
        if value == "off":
            await quotas.set_override(person, None)
            await self.say(incoming, t(language, "quota_set_off", user=user))
        elif value == "default":
            cleared = await quotas.clear_override(person)
            await self.say(incoming, t(language, "quota_cleared" if cleared else "quota_not_set",
                                       user=user))  # fmt: skip
        elif _TOKENS.fullmatch(value) and 0 < int(value) <= MAX_OVERRIDE_TOKENS:
            await quotas.set_override(person, int(value))
            await self.say(incoming, t(language, "quota_set", user=user, limit=int(value)))
        else:
            await self.say(incoming, help_text(language))


def help_text(language: str) -> str:
    """The usage text: the command's forms, then the forms a person is named in."""
    return "\n\n".join(
        (t(language, "quota_help", max=MAX_OVERRIDE_TOKENS), t(language, "quota_help_people"))
    )


def person_named(user: str, scope: int = 0) -> str | None:
    """The person a /quota argument names: a Telegram user id (of this bot's `scope`),
    `api:<userId>` or `api<n>:<userId>` (stored bot n's API user)."""
    if (person := named_person(user)) is not None:
        return person
    if _USER_ID.fullmatch(user) and 0 < int(user) <= _MAX_USER_ID:
        return telegram_person(int(user), scope)
    return None


def show_text(quota: PersonQuota, user: str, language: str) -> str:
    """A person's limits (and whether an operator set them) and their usage."""
    limits, standing = quota.limits, quota.standing
    if limits.exempt:
        state = t(language, "quota_state_exempt")
    else:
        none = t(language, "quota_none")
        state = t(
            language,
            "quota_state_limits",
            daily=limits.daily_tokens or none,
            monthly=limits.monthly_tokens or none,
            consultations=limits.daily_consultations or none,
        )
    if limits.overridden:
        state += t(language, "quota_overridden")
    return t(
        language,
        "quota_show",
        user=user,
        state=state,
        today=standing.tokens_today,
        month=standing.tokens_month,
        started=standing.consultations_today,
    )
