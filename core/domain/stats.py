"""The operator's figures over a period of UTC days: how many people, how consultations
went, what the models cost, and how long a final answer took.

Invariants:
- A period is whole UTC days, `days` of them ending with the day of `now` (today
  included): `[since, until)` in Unix time, `since_day`..`until_day` as the usage table
  names days. Figures never depend on the server's time zone.
- A consultation counts as started on the day it was created and as completed, reset or
  expired on the day its status changed (`ended_at`), so each event counts once, on the
  day it happened, however long the consultation ran.
- Rates and means are None when nothing was there to divide by; never a division by zero.
- Percentiles are the continuous kind (linear interpolation between the closest ranks,
  as PostgreSQL's `percentile_cont`): `percentile_rank` says which two ranks and how far
  between them, so a store that has no such function reads only those two rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from core.domain.tool_usage import ToolCount
from core.domain.usage import UsageTotal

DAY_SECONDS = 86_400
MAX_DAYS = 90
"""The longest period the figures cover (what the API's `days` accepts)."""
MAX_MODELS = 50
"""At most this many models are listed (the costliest first); the totals count all."""
MEDIAN = 0.5
P95 = 0.95
ROUNDS_TAIL = 10
"""Completed consultations that used this many rounds or more share one bucket ("10+"),
so the distribution has at most `ROUNDS_TAIL + 1` buckets whatever the rounds stored."""


@dataclass(frozen=True, slots=True)
class Period:
    """`days` whole UTC days ending with today (`until_day`), today included."""

    days: int
    since: float  # the first day's 00:00 UTC
    until: float  # the day after the last, 00:00 UTC (exclusive)
    since_day: str
    until_day: str


def period_of(now: float, days: int) -> Period:
    """The last `days` UTC days up to and including the day of `now`; 1 ≤ days ≤ MAX_DAYS."""
    if not 1 <= days <= MAX_DAYS:
        raise ValueError(f"days must be between 1 and {MAX_DAYS}")
    today = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    first = today - timedelta(days=days - 1)
    return Period(
        days=days,
        since=first.timestamp(),
        until=(today + timedelta(days=1)).timestamp(),
        since_day=first.strftime("%Y-%m-%d"),
        until_day=today.strftime("%Y-%m-%d"),
    )


def percentile_rank(count: int, fraction: float) -> tuple[int, float]:
    """For `count` sorted values: the 0-based rank of the lower of the two values the
    `fraction` percentile lies between, and how far towards the next one it lies."""
    position = fraction * (count - 1)
    lower = math.floor(position)
    return lower, position - lower


def interpolate(lower: float, upper: float | None, weight: float) -> float:
    """The value `weight` of the way from `lower` to `upper` (None: no upper, `lower`)."""
    if upper is None or weight == 0:
        return lower
    return lower + (upper - lower) * weight


@dataclass(frozen=True, slots=True)
class RoundsBucket:
    """Completed consultations that used `rounds` rounds (`rounds` or more for the tail)."""

    rounds: int
    count: int
    tail: bool = False

    @property
    def label(self) -> str:
        return f"{self.rounds}+" if self.tail else str(self.rounds)


def rounds_distribution(counts: Iterable[tuple[int, int]]) -> tuple[RoundsBucket, ...]:
    """The buckets 1 to `ROUNDS_TAIL` - 1, then `ROUNDS_TAIL`+, from the store's (rounds
    used, consultations) rows; a bucket nothing fell in counts 0. Rounds at or past the
    tail add to it; 0 rounds (the engine never completes a consultation without its final
    answer, which is a round) gets a bucket of its own only when something was counted
    there, so a stored oddity shows instead of hiding in another bucket."""
    found = [0] * (ROUNDS_TAIL + 1)
    for rounds, count in counts:
        found[min(max(rounds, 0), ROUNDS_TAIL)] += count
    buckets = [
        RoundsBucket(rounds, found[rounds], tail=rounds == ROUNDS_TAIL)
        for rounds in range(1, ROUNDS_TAIL + 1)
    ]
    if found[0]:
        buckets.insert(0, RoundsBucket(0, found[0]))
    return tuple(buckets)


@dataclass(frozen=True, slots=True)
class Stats:
    """The figures of one period, as the store counts them.

    `people`: distinct persons charged for a model call or who started a consultation.
    `started`: consultations created. `completed`, `reset`, `expired`: consultations whose
    status changed so. `rounds_used`: the rounds of the completed ones, added up;
    `rounds`: how many of them used each number of rounds (`rounds_distribution`; empty
    when the store did not count it). A round is one reply of the model, the final answer
    included, so a consultation answered at once used 1.
    `early_finishes`: completed ones that ended before their last round (the person asked
    for the answer, or the model found it knew enough). `follow_ups`: follow-up questions
    answered. `usage`: tokens and cost by model (the costliest `MAX_MODELS`); the totals
    count every model. Answer times: seconds from a consultation's start to its final
    answer, of those completed; None when none was. `tools`: every chat's tool calls by
    tool (`core.domain.tool_usage`), ordered by tool.
    """

    since_day: str
    until_day: str
    people: int = 0
    started: int = 0
    completed: int = 0
    reset: int = 0
    expired: int = 0
    rounds_used: int = 0
    early_finishes: int = 0
    follow_ups: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    usage: tuple[UsageTotal, ...] = ()
    answer_seconds_median: float | None = None
    answer_seconds_p95: float | None = None
    unpriced: tuple[str, ...] = ()  # models used that have no price
    rounds: tuple[RoundsBucket, ...] = ()
    tools: tuple[ToolCount, ...] = ()

    @property
    def ended(self) -> int:
        return self.completed + self.reset + self.expired

    @property
    def completion_rate(self) -> float | None:
        """Of the consultations that ended in the period, the share ended by a final answer."""
        return self.completed / self.ended if self.ended else None

    @property
    def mean_rounds(self) -> float | None:
        """The mean rounds a completed consultation used."""
        return self.rounds_used / self.completed if self.completed else None

    @property
    def rounds_counted(self) -> tuple[RoundsBucket, ...]:
        """The buckets of `rounds` some completed consultation fell in, fewest rounds first."""
        return tuple(bucket for bucket in self.rounds if bucket.count)

    def rounds_share(self, bucket: RoundsBucket) -> float | None:
        """`bucket`'s share of the period's completed consultations; None when none was."""
        return bucket.count / self.completed if self.completed else None


@dataclass(frozen=True, slots=True)
class DayFigures:
    """One UTC day's counts, as `Stats` counts them over a period: consultations started,
    and completed, reset or expired that day; tokens and cost charged that day."""

    day: str
    started: int = 0
    completed: int = 0
    reset: int = 0
    expired: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    @property
    def ended(self) -> int:
        return self.completed + self.reset + self.expired

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def days_of(period: Period) -> list[str]:
    """The period's days (`YYYY-MM-DD`, UTC), oldest first."""
    first = datetime.fromtimestamp(period.since, UTC)
    return [(first + timedelta(days=i)).strftime("%Y-%m-%d") for i in range(period.days)]


def daily_figures(
    period: Period,
    events: Iterable[tuple[int, str, int]],
    usage: Iterable[tuple[str, int, int, float]],
) -> list[DayFigures]:
    """The period's days, oldest first, from what the store counted: `events` as (day
    index from the period's start, "started" or the status ended in, count) and `usage` as
    (day, prompt tokens, completion tokens, cost). Days with nothing counted have zeros;
    an index outside the period is ignored."""
    days = days_of(period)
    counts: dict[str, dict[str, int]] = {day: {} for day in days}
    for index, what, count in events:
        if 0 <= index < len(days):
            counts[days[index]][what] = count
    spent = {day: (prompt, completion, cost) for day, prompt, completion, cost in usage}
    return [
        DayFigures(
            day,
            started=counts[day].get("started", 0),
            completed=counts[day].get("complete", 0),
            reset=counts[day].get("reset", 0),
            expired=counts[day].get("expired", 0),
            prompt_tokens=spent.get(day, (0, 0, 0.0))[0],
            completion_tokens=spent.get(day, (0, 0, 0.0))[1],
            cost=spent.get(day, (0, 0, 0.0))[2],
        )
        for day in days
    ]
