"""Quota checks: `Quotas` reads a payer's standing from the store and admits or refuses
their turns by the rules of `core.domain.quotas`.

Invariants:
- An admin's override applies to this worker's next turn at once, and to other workers'
  within `OVERRIDE_CACHE_SECONDS` (each keeps what it read that long, so a turn usually
  costs no read for it). So does a person's plan (`plan_of`, the per-person source of
  limits and of the plan's models, `plan_models`: a plan granted or revoked here is read
  afresh at once, via `refresh`).
- Concurrency (any number of turns, workers and stores): a turn is admitted by
  `admit`, which reads the standing and takes the turn's token hold in one step under
  the person's and the client key's lock (`ConsultationStore.hold_tokens`), so a check
  sees every turn admitted before it, charged or still running; before each model call
  the hold is set to what the turn's calls really spent so far plus this call's
  estimated input and its `max_tokens`, and the turn's charge settles it when the hold
  is released (`core.turns.quota_holds`). A token limit is therefore
  passed by at most the reservation of the turn admitted last, plus what is spent
  without a check (a final answer's continuations, a consultation under way finishing
  over the limit, an input longer than estimated), however many requests arrive at once.
  A start is counted only below the consultation limit, by one conditional write in the
  transaction that stores it (`ConsultationStore.create`'s `start_limit`): exactly the
  limit's starts are stored, the rest refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.domain.plans import Plan
from core.domain.quotas import (
    ALLOW,
    HOLD_SECONDS,
    OVERRIDE_CACHE_SECONDS,
    OVERRIDE_CACHE_SIZE,
    Limit,
    PersonLimits,
    PersonQuota,
    QuotaConfig,
    QuotaExceeded,
    QuotaHit,
    QuotaOverride,
    Stage,
    Standing,
    StartRefused,
    TokenHold,
    Verdict,
    decide,
    limits_for,
    resets_at,
)
from core.domain.usage import Payer, ScopeKind, UsageTotal, day_of, month_start
from core.primitives.expiring import ReadThrough
from core.turns.quota_holds import Held

if TYPE_CHECKING:
    from core.domain.ports import ConsultationStore


PlanOf = Callable[[str], Awaitable[Plan | None]]
"""A person's active plan, None without one (`core.turns.plan_sales.PlanSales.plan_of`)."""


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


class Quotas:
    """Checks turns against the limits, reading committed totals from the store."""

    def __init__(
        self,
        store: ConsultationStore,
        config: QuotaConfig,
        clock: Callable[[], float],
        on_refused: Callable[[Limit], None] | None = None,
        plan_of: PlanOf | None = None,
    ) -> None:
        """`on_refused` hears the limit of each turn refused (the metrics); `plan_of`
        reads a person's active plan (without it no one has a plan)."""
        self._store = store
        self._config = config
        self._clock = clock
        self._on_refused = on_refused
        self._overrides = ReadThrough(
            store.load_quota_override, OVERRIDE_CACHE_SECONDS, max_size=OVERRIDE_CACHE_SIZE
        )
        self._plan_of = plan_of
        self._plans = ReadThrough(
            self._read_plan, OVERRIDE_CACHE_SECONDS, max_size=OVERRIDE_CACHE_SIZE
        )

    def use_plans(self, plan_of: PlanOf | None) -> None:
        """Read people's plans with `plan_of` from now on (the composition root wires it
        after the store's payment book exists; None: no one has a plan here)."""
        self._plan_of = plan_of
        self._plans = ReadThrough(
            self._read_plan, OVERRIDE_CACHE_SECONDS, max_size=OVERRIDE_CACHE_SIZE
        )

    async def _read_plan(self, person: str) -> Plan | None:
        return None if self._plan_of is None else await self._plan_of(person)

    async def plan_models(self, person: str | None) -> tuple[str, ...]:
        """The models the person's active plan lists (`core.domain.plans.models_with_plan`);
        empty without a person, a plan, or models in it. Read as the plan's limits are
        (the same cache), whatever the person's limits."""
        if person is None or self._plan_of is None:
            return ()
        plan = await self._plans.get(person)
        return () if plan is None else plan.models

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
        charged plus every turn's hold (`core.turns.quota_holds`), so turns admitted at once
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
            # Starts alone: read here, and checked again as they are counted (`create`).
            needs = _Reads(today=False, month=False, starts=bool(start_limit), client=False)
            standing = await self._standing(payer, needs, now)
            verdict = decide(limits, 0, standing, stage, now)
            if verdict.hit is not None and verdict.refused:
                raise self._refusal(verdict.hit, heard)
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
            raise self._refusal(verdict.hit, heard)
        return Admission(verdict, Held(self._store, hold, self._clock), start_limit)

    def start_refused(self, admission: Admission, refused: StartRefused) -> QuotaExceeded:
        """The refusal of a start the store found at the consultation limit."""
        limit = Limit.USER_DAILY_CONSULTATIONS
        now = self._clock()
        hit = QuotaHit(limit, admission.start_limit, refused.started, resets_at(limit, now))
        return self._refusal(hit)

    def _refusal(self, hit: QuotaHit, heard: bool = True) -> QuotaExceeded:
        """The refusal of `hit`, counted by `on_refused` when `heard`."""
        if heard and self._on_refused is not None:
            self._on_refused(hit.limit)
        return QuotaExceeded(hit)

    async def _limits(self, payer: Payer) -> tuple[PersonLimits, int]:
        """The person limits that apply to `payer` and its client key's daily limit."""
        client_limit = self._config.api_daily_tokens if payer.client else 0
        limits = PersonLimits()
        if payer.person is not None and not self._config.exempts(payer.person):
            override = await self._override(payer.person)
            plan = None if self._plan_of is None else await self._plans.get(payer.person)
            held = None if plan is None else (plan.id, plan.limits)
            limits = limits_for(self._config, payer.person, override, held)
        return limits, client_limit

    async def of_person(self, person: str) -> PersonQuota:
        """The person's limits and standing, whatever applies (for /usage and /quota)."""
        override = await self._store.load_quota_override(person)
        plan = await self._read_plan(person)
        held = None if plan is None else (plan.id, plan.limits)
        limits = limits_for(self._config, person, override, held)
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
        the store directly, with its audit entry; or their plan was granted or revoked)."""
        self._overrides.discard(person)
        self._plans.discard(person)

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
