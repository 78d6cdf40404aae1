"""Quotas: how many tokens a person (and an API token) may spend, and how many
consultations a person may start, checked before the model is called.

Invariants:
- A limit of 0 is no limit. Tokens are prompt + completion, as charged (`core.domain.usage`),
  summed over the person's (or client key's) UTC day or UTC month; consultations are
  those the person started that UTC day (`ConsultationStore.consultations_started`).
- At the boundary: a person who has used `limit - 1` may go on; one who has used `limit`
  or more is over it. "Used" counts the tokens charged and those held by turns under way.
- A person exempt by the deployment (`QuotaConfig.exempt`: QUOTA_EXEMPT_USER_IDS and
  ADMIN_USER_IDS, Telegram ids exempt in every bot of the deployment: `QuotaConfig.exempts`)
  or by an admin's override (one bot's person) has no person limits at all; an override with
  a number replaces only the daily token limit. A person with an active plan
  (`core.domain.plans`) gets the plan's limits instead of the deployment's (each limit the
  plan names; an override's daily tokens still win). The API token's limit is the
  client's, never lifted by a person's exemption.
- `decide` is pure: the same standing gives the same verdict. Starting a consultation or
  asking a follow-up over a limit is refused (`QuotaExceeded`, nothing stored, no round
  used); a consultation already under way is never cut mid-way: its next turn is answered
  as its final answer (`Verdict.finish`), counted like any other, and then it is over.
  Asking for the final answer (/answer) is never refused. A turn's limits are its payer's:
  in a group, the member whose message it is. A turn handled again (the same update or
  idempotency key) is not checked again: it was checked when its message was stored.

They are checked against the store by `core.turns.quota_checks.Quotas`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from core.domain.errors import ConsultationError
from core.domain.plans import PlanLimits
from core.domain.telegram_keys import unscoped

MAX_OVERRIDE_TOKENS = 1_000_000_000
"""The largest daily token limit an override may set (`/quota`)."""

OVERRIDE_CACHE_SECONDS = 10.0
"""How long a worker trusts a person's override (or its absence) as read: a turn then costs
no read for it. An override set on this worker applies at once; one set on another worker
within this time."""
OVERRIDE_CACHE_SIZE = 100_000


class Limit(enum.StrEnum):
    """Which limit was reached; also the label of the refusals metric."""

    USER_DAILY_TOKENS = "user_daily_tokens"
    USER_MONTHLY_TOKENS = "user_monthly_tokens"
    USER_DAILY_CONSULTATIONS = "user_daily_consultations"
    API_DAILY_TOKENS = "api_daily_tokens"


class Stage(enum.StrEnum):
    """What a turn would do: start a consultation, go on with one under way, or ask a
    follow-up about a finished one."""

    START = "start"
    CONTINUE = "continue"
    FOLLOW_UP = "follow_up"


@dataclass(frozen=True, slots=True)
class QuotaConfig:
    """The deployment's limits (0: none) and the people exempt from them (person keys)."""

    user_daily_tokens: int = 0
    user_monthly_tokens: int = 0
    user_daily_consultations: int = 0
    api_daily_tokens: int = 0
    exempt: frozenset[str] = frozenset()

    def exempts(self, person: str) -> bool:
        """Whether the deployment exempts `person`: listed, or a Telegram user listed by
        id, in whichever bot (`tg2:42` is exempt when `tg:42` is listed)."""
        return person in self.exempt or unscoped(person) in self.exempt


@dataclass(frozen=True, slots=True)
class QuotaOverride:
    """An admin's word on one person: a daily token limit, or None for exempt."""

    person: str
    daily_tokens: int | None

    @property
    def exempt(self) -> bool:
        return self.daily_tokens is None


@dataclass(frozen=True, slots=True)
class PersonLimits:
    """The limits that apply to one person (0: none), and why."""

    daily_tokens: int = 0
    monthly_tokens: int = 0
    daily_consultations: int = 0
    exempt: bool = False
    overridden: bool = False
    plan: str = ""
    """The id of the active plan whose limits these are ("" for none)."""

    @property
    def any(self) -> bool:
        return bool(self.daily_tokens or self.monthly_tokens or self.daily_consultations)


def limits_for(
    config: QuotaConfig,
    person: str,
    override: QuotaOverride | None,
    plan: tuple[str, PlanLimits] | None = None,
) -> PersonLimits:
    """The deployment's limits, unless the person is exempt, an override says otherwise, or
    an active `plan` (its id and limits) replaces those it names."""
    if config.exempts(person):
        return PersonLimits(exempt=True)
    if override is not None and override.exempt:
        return PersonLimits(exempt=True, overridden=True)
    daily = config.user_daily_tokens
    monthly = config.user_monthly_tokens
    consultations = config.user_daily_consultations
    plan_id = ""
    if plan is not None:
        plan_id, given = plan
        if given.daily_tokens is not None:
            daily = given.daily_tokens
        if given.monthly_tokens is not None:
            monthly = given.monthly_tokens
        if given.daily_consultations is not None:
            consultations = given.daily_consultations
    if override is not None and override.daily_tokens is not None:
        daily = override.daily_tokens
    return PersonLimits(
        daily_tokens=daily,
        monthly_tokens=monthly,
        daily_consultations=consultations,
        overridden=override is not None,
        plan=plan_id,
    )


@dataclass(frozen=True, slots=True)
class Standing:
    """What a person (and the client key) used, as committed when read."""

    tokens_today: int = 0
    tokens_month: int = 0
    consultations_today: int = 0
    client_tokens_today: int = 0


@dataclass(frozen=True, slots=True)
class QuotaHit:
    """A limit reached: which, its size, what was used, and when it resets (Unix time)."""

    limit: Limit
    allowed: int
    used: int
    resets_at: float


@dataclass(frozen=True, slots=True)
class Verdict:
    """ALLOW (`hit` None); refuse (`hit`, not `finish`); or answer as the final answer
    (`hit` and `finish`)."""

    hit: QuotaHit | None = None
    finish: bool = False

    @property
    def refused(self) -> bool:
        return self.hit is not None and not self.finish


ALLOW = Verdict()


class QuotaExceeded(ConsultationError):
    """A turn refused by a quota before the model was called; nothing was stored."""

    code = "QUOTA_EXCEEDED"

    def __init__(self, hit: QuotaHit) -> None:
        super().__init__(f"{hit.limit}: {hit.used} of {hit.allowed}")
        self.hit = hit


def next_day(now: float) -> float:
    """The next UTC midnight after `now`."""
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return (day + timedelta(days=1)).timestamp()


def next_month(now: float) -> float:
    """The first day of the next UTC month, at midnight."""
    at = datetime.fromtimestamp(now, UTC)
    year, month = (at.year + 1, 1) if at.month == 12 else (at.year, at.month + 1)
    return datetime(year, month, 1, tzinfo=UTC).timestamp()


def resets_at(limit: Limit, now: float) -> float:
    return next_month(now) if limit is Limit.USER_MONTHLY_TOKENS else next_day(now)


def decide(
    limits: PersonLimits, client_limit: int, standing: Standing, stage: Stage, now: float
) -> Verdict:
    """The verdict for a turn at `stage` (see the module's invariants)."""
    checks = [
        (Limit.USER_DAILY_TOKENS, limits.daily_tokens, standing.tokens_today),
        (Limit.USER_MONTHLY_TOKENS, limits.monthly_tokens, standing.tokens_month),
        (Limit.API_DAILY_TOKENS, client_limit, standing.client_tokens_today),
    ]
    if stage is Stage.START:
        consultations = (
            Limit.USER_DAILY_CONSULTATIONS,
            limits.daily_consultations,
            standing.consultations_today,
        )
        checks.append(consultations)
    for limit, allowed, used in checks:
        if allowed and used >= allowed:
            hit = QuotaHit(limit, allowed, used, resets_at(limit, now))
            return Verdict(hit, finish=stage is Stage.CONTINUE)
    return ALLOW


@dataclass(frozen=True, slots=True)
class PersonQuota:
    """A person's limits and what they used today and this month (/usage, /quota)."""

    person: str
    limits: PersonLimits
    standing: Standing
    override: QuotaOverride | None = None


HOLD_SECONDS = 900.0
"""How long a hold counts after its last change: longer than any turn's calls."""


@dataclass(frozen=True, slots=True)
class TokenHold:
    """Tokens reserved for one turn of `person` (and `client`) on the UTC `day`."""

    id: str
    person: str | None
    client: str | None
    day: str
    tokens: int
    expires_at: float


class StartRefused(Exception):
    """`ConsultationStore.create` stored nothing: the starter had already started
    `started` consultations that day, the limit it was given."""

    def __init__(self, started: int) -> None:
        super().__init__(f"{started} consultations started today")
        self.started = started
