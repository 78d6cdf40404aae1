"""`GET /api/stats`: the operator's figures (`core.domain.stats`) as JSON — today and the last 7
UTC days, and with `?days=N` the last N days too (`days=30`: about a month), each with its
tool calls by tool (`toolCalls`); with `?bot=N` only the figures of the bot of scope N,
its Telegram chats' and its API sessions' (`core.domain.telegram_keys`,
`core.domain.api_keys`); when any bot sells plans in Stars, or payments or active plans
exist, `sales`: the Stars per UTC day over the last 7 days (or `days`) and the plans active
now (every bot's, or with `?bot=N` that bot's). A request bearing a bot's own API token
gets that bot's figures, without `sales`.

A request pinned to a bot by its API token (`api.bots`) reads that bot's figures only: no
`bot` is that bot, another is FORBIDDEN, and no `sales` (every bot's) are given.

Invariants: `days` and `bot` are read strictly (an integer 1–`MAX_DAYS`, 0–`MAX_SCOPE`, in
plain digits, given at most once; anything else is VALIDATION_ERROR and nothing is read);
the figures are the same the Telegram /stats shows (`core.turns.figures.Figures.stats`), a
handful of indexed reads per period; reading never changes anything.
"""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from api.bots import PINNED_KEY, forbidden
from api.errors import ApiError, json_response
from core.domain.stats import MAX_DAYS, ROUNDS_TAIL, Stats
from core.domain.telegram_keys import MAX_SCOPE
from core.turns.figures import Figures
from core.turns.sales_figures import StarsFigures

WEEK = 7
_CAMEL = ConfigDict(
    alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True, extra="forbid"
)


class ModelUsageOut(BaseModel):
    """One model's tokens and cost over the period (every kind of call)."""

    model_config = _CAMEL

    model: str
    input_tokens: int
    output_tokens: int
    calls: int
    estimated_calls: int = Field(description="Calls whose tokens were estimated")
    cost: float = Field(description="In the unit of MODEL_PRICES")
    priced: bool = Field(description="False: MODEL_PRICES has no price for it (counted as 0)")


class ToolCallsOut(BaseModel):
    """One tool's calls over the period, every chat's (`core.domain.tool_usage`)."""

    model_config = _CAMEL

    tool: str = Field(
        description="The name the model called (`time__get_current_time`); `unknown` for "
        "names no configured tool had"
    )
    calls: int = Field(ge=0)
    failed: int = Field(ge=0, description="Calls that gave no result (timeout, error, …)")


class RoundsUsedOut(BaseModel):
    """Completed consultations that used `rounds` rounds (`rounds` or more when `orMore`)."""

    model_config = _CAMEL

    rounds: int = Field(ge=0, description="Rounds used; a round is one reply of the model")
    or_more: bool = Field(description=f"True for the last bucket: {ROUNDS_TAIL} rounds or more")
    count: int = Field(ge=0, description="Completed consultations in the period")


class PeriodStats(BaseModel):
    """The figures of whole UTC days `since`..`until` (today included)."""

    model_config = _CAMEL

    since: str = Field(json_schema_extra={"format": "date"})
    until: str = Field(json_schema_extra={"format": "date"})
    days: int
    people: int = Field(description="Distinct people charged for a call or starting one")
    started: int
    completed: int = Field(description="Consultations given their final answer in the period")
    reset: int
    expired: int
    completion_rate: float | None = Field(
        description="completed / (completed + reset + expired); null when none ended"
    )
    mean_rounds: float | None = Field(description="Of the completed; null when none was")
    rounds_used: list[RoundsUsedOut] = Field(
        description=f"The completed by rounds used: 1 to {ROUNDS_TAIL - 1}, then {ROUNDS_TAIL} "
        "or more, each listed (count 0 when none); a bucket of 0 rounds first only when some "
        "were counted"
    )
    early_finishes: int = Field(description="Completed before their last round")
    follow_ups: int
    input_tokens: int
    output_tokens: int
    cost: float
    models: list[ModelUsageOut] = Field(description="By model, the costliest first")
    tool_calls: list[ToolCallsOut] = Field(
        description="Tool calls by tool, ordered by tool; empty when none was made"
    )
    answer_seconds_median: float | None = Field(
        description="Seconds from start to final answer, of the completed; null when none was"
    )
    answer_seconds_p95: float | None

    @classmethod
    def of(cls, stats: Stats, days: int) -> PeriodStats:
        return cls(
            since=stats.since_day,
            until=stats.until_day,
            days=days,
            people=stats.people,
            started=stats.started,
            completed=stats.completed,
            reset=stats.reset,
            expired=stats.expired,
            completion_rate=stats.completion_rate,
            mean_rounds=stats.mean_rounds,
            rounds_used=[
                RoundsUsedOut(rounds=b.rounds, or_more=b.tail, count=b.count) for b in stats.rounds
            ],
            early_finishes=stats.early_finishes,
            follow_ups=stats.follow_ups,
            input_tokens=stats.prompt_tokens,
            output_tokens=stats.completion_tokens,
            cost=stats.cost,
            models=[
                ModelUsageOut(
                    model=u.model,
                    input_tokens=u.prompt_tokens,
                    output_tokens=u.completion_tokens,
                    calls=u.calls,
                    estimated_calls=u.estimated_calls,
                    cost=u.cost,
                    priced=u.model not in stats.unpriced,
                )
                for u in stats.usage
            ],
            tool_calls=[
                ToolCallsOut(tool=c.tool, calls=c.calls, failed=c.failed) for c in stats.tools
            ],
            answer_seconds_median=stats.answer_seconds_median,
            answer_seconds_p95=stats.answer_seconds_p95,
        )


class StarsDayOut(BaseModel):
    """The payments in Telegram Stars kept on one UTC day (`core.domain.payments`)."""

    model_config = _CAMEL

    day: str = Field(json_schema_extra={"format": "date"})
    payments: int = Field(ge=0)
    stars: int = Field(ge=0, description="Stars paid that day")
    refunded_stars: int = Field(ge=0, description="Of those, refunded since")


class SalesOut(BaseModel):
    """Plans sold in Telegram Stars (every bot's, or `bot`'s): the Stars per day and the plans
    active now."""

    model_config = _CAMEL

    since: str = Field(json_schema_extra={"format": "date"})
    until: str = Field(json_schema_extra={"format": "date"})
    stars: int = Field(description="Stars kept over the days (refunds taken off)")
    active_plans: int = Field(ge=0, description="People whose plan has not ended")
    days: list[StarsDayOut] = Field(description="Days with a payment, oldest first")


class StatsResponse(BaseModel):
    """`GET /api/stats`: today, the last 7 days, and the last `days` days when asked."""

    model_config = _CAMEL

    today: PeriodStats
    last7_days: PeriodStats
    last_days: PeriodStats | None = Field(default=None, description="Only with `?days=N`")
    sales: SalesOut | None = Field(
        default=None,
        description="Only when a bot sells plans, or payments or plans exist: the last 7 "
        "days (or `days`) of Stars",
    )


class StatsEndpoint:
    def __init__(self, figures: Figures, stars: StarsFigures | None = None) -> None:
        """`stars`: the figures of plans sold in Stars (None: no `sales` in the answer)."""
        self._figures = figures
        self._stars = stars

    async def stats(self, request: web.Request) -> web.Response:
        """The figures of today and the last 7 days (and `days`): 200, or VALIDATION_ERROR."""
        days = _days(request)
        bot = _bot(request)
        pinned = request.get(PINNED_KEY)
        if pinned is not None:
            if bot not in (None, pinned):
                raise forbidden(pinned)
            bot = pinned
        today = await self._figures.stats(1, scope=bot)
        week = await self._figures.stats(WEEK, scope=bot)
        sales = None
        sold = None
        if self._stars is not None and pinned is None:
            sold = await self._stars.figures(WEEK if days is None else days, scope=bot)
        if sold is not None:
            sales = SalesOut(
                since=sold.since_day,
                until=sold.until_day,
                stars=sold.stars,
                active_plans=sold.active_plans,
                days=[
                    StarsDayOut(
                        day=d.day,
                        payments=d.payments,
                        stars=d.stars,
                        refunded_stars=d.refunded_stars,
                    )
                    for d in sold.days
                ],
            )
        view = StatsResponse(
            today=PeriodStats.of(today, 1),
            last7_days=PeriodStats.of(week, WEEK),
            last_days=None
            if days is None
            else PeriodStats.of(await self._figures.stats(days, scope=bot), days),
            sales=sales,
        )
        absent = {"last_days": days is None, "sales": sales is None}
        exclude = {name for name, missing in absent.items() if missing}
        return json_response(view.model_dump(mode="json", exclude=exclude or None))


def _days(request: web.Request) -> int | None:
    given = request.query.getall("days", [])
    if not given:
        return None
    raw = given[0]
    if len(given) > 1 or not (raw.isascii() and raw.isdigit() and len(raw) <= 2):
        raise ApiError("VALIDATION_ERROR", f"days: an integer from 1 to {MAX_DAYS}, given once")
    days = int(raw)
    if not 1 <= days <= MAX_DAYS:
        raise ApiError("VALIDATION_ERROR", f"days: an integer from 1 to {MAX_DAYS}, given once")
    return days


def _bot(request: web.Request) -> int | None:
    """`?bot=N`: only the figures of the bot of scope N (0: the deployment's own); None: all."""
    given = request.query.getall("bot", [])
    if not given:
        return None
    raw = given[0]
    wrong = f"bot: an integer from 0 to {MAX_SCOPE}, given once"
    if len(given) > 1 or not (raw.isascii() and raw.isdigit() and len(raw) <= 19):
        raise ApiError("VALIDATION_ERROR", wrong)
    if (raw.startswith("0") and raw != "0") or int(raw) > MAX_SCOPE:
        raise ApiError("VALIDATION_ERROR", wrong)
    return int(raw)
