"""Quotas: how many tokens a person (and an API token) may spend, and how many
consultations a person may start, checked before the model is called.

Invariants:
- A limit of 0 is no limit. Tokens are prompt + completion, as charged (`core.usage`),
  summed over the person's (or client key's) UTC day or UTC month; consultations are
  those the person started that UTC day (`ConsultationStore.consultations_started`).
- At the boundary: a person who has used `limit - 1` may go on; one who has used `limit`
  or more is over it. "Used" counts the tokens charged and those held by turns under way.
- A person exempt by the deployment (`QuotaConfig.exempt`: QUOTA_EXEMPT_USER_IDS and
  ADMIN_USER_IDS) or by an admin's override has no person limits at all; an override with
  a number replaces only the daily token limit. The API token's limit is the client's,
  never lifted by a person's exemption.
- `decide` is pure: the same standing gives the same verdict. Starting a consultation or
  asking a follow-up over a limit is refused (`QuotaExceeded`, nothing stored, no round
  used); a consultation already under way is never cut mid-way: its next turn is answered
  as its final answer (`Verdict.finish`), counted like any other, and then it is over.
  Asking for the final answer (/answer) is never refused. A turn's limits are its payer's:
  in a group, the member whose message it is. A turn handled again (the same update or
  idempotency key) is not checked again: it was checked when its message was stored.
- An admin's override applies to this worker's next turn at once, and to other workers'
  within `OVERRIDE_CACHE_SECONDS` (each keeps what it read that long, so a turn usually
  costs no read for it).
- Concurrency (any number of turns, workers and stores): a turn is admitted by
  `admit`, which reads the standing and takes the turn's token hold in one step under
  the person's and the client key's lock (`ConsultationStore.hold_tokens`), so a check
  sees every turn admitted before it, charged or still running; each model call then
  reserves its estimated input plus its `max_tokens` in that hold before it is made and
  settles it with the real usage after (`core.quota_holds`). A token limit is therefore
  passed by at most the reservation of the turn admitted last, plus what is spent
  without a check (a final answer's continuations, a consultation under way finishing
  over the limit, an input longer than estimated), however many requests arrive at once.
  A start is counted only below the consultation limit, by one conditional write in the
  transaction that stores it (`ConsultationStore.create`'s `start_limit`): exactly the
  limit's starts are stored, the rest refused.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from core.errors import ConsultationError
from core.expiring import ReadThrough
from core.quota_holds import HOLD_SECONDS, Held, StartRefused, TokenHold
from core.usage import Payer, ScopeKind, UsageTotal, day_of, month_start

if TYPE_CHECKING:  # the port names quota types itself
    from core.ports import ConsultationStore

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

    @property
    def any(self) -> bool:
        return bool(self.daily_tokens or self.monthly_tokens or self.daily_consultations)


def limits_for(config: QuotaConfig, person: str, override: QuotaOverride | None) -> PersonLimits:
    """The deployment's limits, unless the person is exempt or an override says otherwise."""
    if person in config.exempt:
        return PersonLimits(exempt=True)
    if override is not None and override.exempt:
        return PersonLimits(exempt=True, overridden=True)
    daily = config.user_daily_tokens
    if override is not None and override.daily_tokens is not None:
        daily = override.daily_tokens
    return PersonLimits(
        daily_tokens=daily,
        monthly_tokens=config.user_monthly_tokens,
        daily_consultations=config.user_daily_consultations,
        overridden=override is not None,
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


def tokens(totals: list[UsageTotal]) -> int:
    return sum(t.prompt_tokens + t.completion_tokens for t in totals)


@dataclass(frozen=True, slots=True)
class _Reads:
    """Which totals a check needs (only those of the limits that apply are read)."""

    today: bool
    month: bool
    starts: bool
    client: bool


@dataclass(frozen=True, slots=True)
class Admission:
    """A turn let through: its verdict (ALLOW, or answer as final), the hold its calls
    reserve in (None: no token limit applies), and the consultation limit its start must
    stay within (0: none)."""

    verdict: Verdict = ALLOW
    held: Held | None = None
    start_limit: int = 0


OPEN = Admission()


@dataclass(frozen=True, slots=True)
class PersonQuota:
    """A person's limits and what they used today and this month (/usage, /quota)."""

    person: str
    limits: PersonLimits
    standing: Standing
    override: QuotaOverride | None = None


class Quotas:
    """Checks turns against the limits, reading committed totals from the store."""

    def __init__(
        self,
        store: ConsultationStore,
        config: QuotaConfig,
        clock: Callable[[], float],
        on_refused: Callable[[Limit], None] | None = None,
    ) -> None:
        """`on_refused` hears the limit of each turn refused (the metrics)."""
        self._store = store
        self._config = config
        self._clock = clock
        self._on_refused = on_refused
        self._overrides = ReadThrough(
            store.load_quota_override, OVERRIDE_CACHE_SECONDS, max_size=OVERRIDE_CACHE_SIZE
        )

    @property
    def config(self) -> QuotaConfig:
        return self._config

    async def check(self, payer: Payer | None, stage: Stage) -> Verdict:
        """The verdict for a turn of `payer` at `stage`; reads nothing when no limit can
        apply (no person and no client limit, or an exempt person and no client limit)."""
        verdict = await self._verdict(payer or Payer(), stage)
        if verdict.refused and verdict.hit is not None and self._on_refused is not None:
            self._on_refused(verdict.hit.limit)
        return verdict

    async def _verdict(self, payer: Payer, stage: Stage) -> Verdict:
        now = self._clock()
        limits, client_limit = await self._limits(payer)
        if not limits.any and not client_limit:
            return ALLOW
        needs = _Reads(
            today=bool(limits.daily_tokens),
            month=bool(limits.monthly_tokens),
            starts=bool(limits.daily_consultations) and stage is Stage.START,
            client=bool(client_limit),
        )
        standing = await self._standing(payer, needs, now)
        return decide(limits, client_limit, standing, stage, now)

    async def require(self, payer: Payer | None, stage: Stage) -> Verdict:
        """`check`, raising `QuotaExceeded` for a refusal."""
        verdict = await self.check(payer, stage)
        if verdict.refused:
            assert verdict.hit is not None
            raise QuotaExceeded(verdict.hit)
        return verdict

    async def admit(
        self, payer: Payer | None, stage: Stage, tokens: int, *, heard: bool = True
    ) -> Admission:
        """Let a turn of `payer` at `stage` through, reserving `tokens` (its first call's
        estimated input and budget) for it atomically with the check, or raise
        `QuotaExceeded` holding nothing. Under a token limit the check reads the tokens
        charged plus every turn's hold (`core.quota_holds`), so turns admitted at once
        see each other; a consultation under way is always let through (as its final
        answer over a limit). Reads and holds nothing when no limit can apply. Optional
        work paid with a person's tokens (remembering facts) is admitted with `heard`
        False: its refusal is not counted as a turn refused."""
        payer = payer or Payer()
        now = self._clock()
        limits, client_limit = await self._limits(payer)
        if not limits.any and not client_limit:
            return OPEN
        start_limit = limits.daily_consultations if stage is Stage.START else 0
        if not (limits.daily_tokens or limits.monthly_tokens or client_limit):
            # Starts alone: checked here, and again as they are counted (`create`).
            verdict = await self._verdict(payer, stage)
            if verdict.refused:
                assert verdict.hit is not None
                if heard and self._on_refused is not None:
                    self._on_refused(verdict.hit.limit)
                raise QuotaExceeded(verdict.hit)
            return Admission(verdict, None, start_limit)
        day = day_of(now)
        hold = TokenHold(
            str(uuid.uuid4()), payer.person, payer.client, day, tokens, now + HOLD_SECONDS
        )

        def admitted(standing: Standing) -> bool:
            return not decide(limits, client_limit, standing, stage, now).refused

        standing, held = await self._store.hold_tokens(
            hold, month=month_start(day), now=now, admit=admitted
        )
        verdict = decide(limits, client_limit, standing, stage, now)
        if not held:
            assert verdict.hit is not None
            if heard and self._on_refused is not None:
                self._on_refused(verdict.hit.limit)
            raise QuotaExceeded(verdict.hit)
        return Admission(verdict, Held(self._store, hold, self._clock), start_limit)

    def start_refused(self, admission: Admission, refused: StartRefused) -> QuotaExceeded:
        """The refusal of a start the store found at the consultation limit."""
        limit = Limit.USER_DAILY_CONSULTATIONS
        now = self._clock()
        hit = QuotaHit(limit, admission.start_limit, refused.started, resets_at(limit, now))
        if self._on_refused is not None:
            self._on_refused(limit)
        return QuotaExceeded(hit)

    async def _limits(self, payer: Payer) -> tuple[PersonLimits, int]:
        """The person limits that apply to `payer` and its client key's daily limit."""
        client_limit = self._config.api_daily_tokens if payer.client else 0
        limits = PersonLimits()
        if payer.person is not None and payer.person not in self._config.exempt:
            override = await self._override(payer.person)
            limits = limits_for(self._config, payer.person, override)
        return limits, client_limit

    async def of_person(self, person: str) -> PersonQuota:
        """The person's limits and standing, whatever applies (for /usage and /quota)."""
        override = await self._store.load_quota_override(person)
        limits = limits_for(self._config, person, override)
        every = _Reads(today=True, month=True, starts=True, client=False)
        standing = await self._standing(Payer(person=person), every, self._clock())
        return PersonQuota(person, limits, standing, override)

    async def set_override(self, person: str, daily_tokens: int | None) -> None:
        """Set the person's daily token limit (None: exempt them)."""
        await self._store.save_quota_override(QuotaOverride(person, daily_tokens), at=self._clock())
        self._overrides.discard(person)

    async def clear_override(self, person: str) -> bool:
        """Back to the deployment's limits; True when there was an override."""
        deleted = await self._store.delete_quota_override(person)
        self._overrides.discard(person)
        return deleted

    def refresh(self, person: str) -> None:
        """Read the person's override afresh on their next turn (it was changed through
        the store directly, with its audit entry)."""
        self._overrides.discard(person)

    async def _override(self, person: str) -> QuotaOverride | None:
        """The person's override as the store had it at most `OVERRIDE_CACHE_SECONDS` ago."""
        return await self._overrides.get(person)

    async def _standing(self, payer: Payer, needs: _Reads, now: float) -> Standing:
        """What `needs` names, read from the store; the rest is 0."""
        today = day_of(now)
        store = self._store
        person = payer.person
        today_tokens = month_tokens = started = client_tokens = 0
        if person is not None and needs.today:
            totals = await store.usage_of(
                ScopeKind.PERSON, person, since_day=today, until_day=today
            )
            today_tokens = tokens(totals)
        if person is not None and needs.month:
            since = month_start(today)
            totals = await store.usage_of(
                ScopeKind.PERSON, person, since_day=since, until_day=today
            )
            month_tokens = tokens(totals)
        if person is not None and needs.starts:
            started = await store.consultations_started(person, today)
        if payer.client is not None and needs.client:
            totals = await store.usage_of(
                ScopeKind.CLIENT, payer.client, since_day=today, until_day=today
            )
            client_tokens = tokens(totals)
        return Standing(today_tokens, month_tokens, started, client_tokens)
