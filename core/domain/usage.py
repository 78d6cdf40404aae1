"""Usage accounting: what a model call cost, charged to who asked, where and through which key.

Invariants:
- A `Charge` is one model call's (or one reply's calls') tokens under one model and one kind
  of call; its cost comes from `Prices` (per million tokens), 0 and `priced=False` for a
  model without a price, so an unpriced model shows as such instead of as free.
- The day a charge counts for is its UTC calendar day (`day_of`), from a clock the caller
  injects: totals by day do not depend on the server's time zone.
- A charge names up to three scopes (`scopes`): the person, the chat and the API client key;
  the store adds it to each scope's daily total, so each is one indexed read.
- A transcription is charged as soon as it is heard (`Accounting.charge_transcription`):
  the service billed it whether or not the turn it makes is answered.
- A reply's charge is stored with the reply, atomically (`ConsultationStore.record_reply`):
  a crash cannot separate a delivered reply from its count. A call with nothing stored
  after it (a memory note) is counted as soon as it returns, before its result is kept: a
  crash in between errs towards counting, as the tokens were spent either way.
- A reply's tool calls ride in its charge (`Charge.tools`, `core.domain.tool_usage`): the
  store counts them per tool with its tokens, in the same transaction.
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from core.domain.attachments import Transcription
from core.domain.consultation import Usage
from core.domain.tokens import estimate_tokens
from core.domain.tool_usage import ToolCalls, ToolCount, tool_counts
from core.domain.tools import ToolUse

_DATED = re.compile(r"(.+?)-(?:\d{4}-\d{2}-\d{2}|\d{4})")
PER_TOKENS = 1_000_000
"""Prices are per this many tokens."""
_PRICE_FIELDS = {
    frozenset({"input", "output"}),
    frozenset({"per_minute"}),
    frozenset({"input", "output", "per_minute"}),
}


class CallKind(enum.StrEnum):
    ROUND = "round"
    FINAL = "final"
    CONTINUATION = "continuation"
    FOLLOW_UP = "follow_up"
    TRANSCRIPTION = "transcription"
    MEMORY = "memory"


class ScopeKind(enum.StrEnum):
    PERSON = "person"
    CHAT = "chat"
    CLIENT = "client"


@dataclass(frozen=True, slots=True)
class Price:
    """Per million tokens in and out; `per_minute` of audio for a transcription model
    billed by duration (None: not priced that way)."""

    input: float = 0.0
    output: float = 0.0
    per_minute: float | None = None


class PricesInvalid(ValueError):
    """MODEL_PRICES is not a JSON object of models to non-negative input/output prices."""


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices per million tokens by model name (exact match)."""

    by_model: Mapping[str, Price] = field(default_factory=dict)

    def of(self, model: str) -> Price | None:
        """`model`'s price; a dated snapshot the provider names (`gpt-4o-mini-2024-07-18`,
        `…-0125`) has its model's price when it has none of its own."""
        price = self.by_model.get(model)
        if price is None and (dated := _DATED.fullmatch(model)) is not None:
            price = self.by_model.get(dated.group(1))
        return price


def parse_prices(text: str) -> Prices:
    """`{"model": {"input": 0.15, "output": 0.6}, ...}` as `Prices`; empty text: no prices.

    Strict: anything else (bad JSON, a missing or negative or non-finite price, an unknown
    field) raises `PricesInvalid`, so a typo stops the start instead of making calls free.
    """
    if not text.strip():
        return Prices()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise PricesInvalid(f"MODEL_PRICES is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise PricesInvalid("MODEL_PRICES must be a JSON object of model names to prices")
    prices: dict[str, Price] = {}
    for model, entry in value.items():
        if not model or not isinstance(entry, dict) or frozenset(entry) not in _PRICE_FIELDS:
            raise PricesInvalid(
                f'MODEL_PRICES[{model!r}] must be {{"input": <price>, "output": <price>}}'
                ' or, for a transcription model billed by the minute, {"per_minute": <price>}'
            )
        for amount in entry.values():
            valid = isinstance(amount, int | float) and not isinstance(amount, bool)
            if not valid or not math.isfinite(amount) or amount < 0:
                raise PricesInvalid(f"MODEL_PRICES[{model!r}] prices must be non-negative numbers")
        per_minute = entry.get("per_minute")
        prices[model] = Price(
            float(entry.get("input", 0.0)),
            float(entry.get("output", 0.0)),
            None if per_minute is None else float(per_minute),
        )
    return Prices(prices)


def cost_of(usage: Usage, model: str, prices: Prices) -> tuple[float, bool]:
    """The cost of `usage` under `model`'s price, and whether the model had one."""
    price = prices.of(model)
    if price is None:
        return 0.0, False
    cost = usage.prompt_tokens * price.input + usage.completion_tokens * price.output
    return cost / PER_TOKENS, True


def transcription_usage(heard: Transcription, prices: Prices) -> tuple[Usage, float, bool]:
    """What a transcription cost: its tokens at the model's token prices when the service
    reported tokens; its seconds at `per_minute` when it reported the audio's length
    (no tokens then); else the transcript's tokens estimated as output, the audio in
    unknown, so the charge is marked estimated. Returns the usage, cost and whether priced."""
    price = prices.of(heard.model)
    if heard.usage is not None:
        cost, priced = cost_of(heard.usage, heard.model, prices)
        return heard.usage, cost, priced
    if heard.seconds is not None:
        if price is None or price.per_minute is None:
            return Usage(), 0.0, False
        return Usage(), heard.seconds / 60 * price.per_minute, True
    usage = Usage(0, estimate_tokens(heard.text), estimated=True)
    cost, priced = cost_of(usage, heard.model, prices)
    return usage, cost, priced


def day_of(timestamp: float) -> str:
    """The UTC calendar day of a Unix time, as `YYYY-MM-DD` (sorts as it counts)."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d")


def month_start(day: str) -> str:
    """The first day of `day`'s month."""
    return f"{day[:7]}-01"


@dataclass(frozen=True, slots=True)
class Payer:
    """Who a call is charged to beyond its chat: the person (`tg:<user id>`, `api:<userId>`,
    as `core.domain.facts` names people) and the API client key; None: not known."""

    person: str | None = None
    client: str | None = None


@dataclass(frozen=True, slots=True)
class Charge:
    """One reply's (or one call's) usage, priced, with where it counts; `tools`: the
    reply's tool calls by tool (`core.domain.tool_usage.tool_counts`)."""

    day: str
    chat: str
    model: str
    kind: CallKind
    usage: Usage
    cost: float
    priced: bool
    person: str | None = None
    client: str | None = None
    tools: tuple[ToolCount, ...] = ()

    def scopes(self) -> list[tuple[ScopeKind, str]]:
        """The scopes this charge adds to, each at most once."""
        named = [
            (ScopeKind.PERSON, self.person),
            (ScopeKind.CHAT, self.chat),
            (ScopeKind.CLIENT, self.client),
        ]
        return [(kind, key) for kind, key in named if key]


def charge_of(
    usage: Usage,
    *,
    model: str,
    kind: CallKind,
    chat: str,
    payer: Payer | None,
    prices: Prices,
    at: float,
    tool_uses: Sequence[ToolUse] = (),
) -> Charge:
    """Price `usage` and name where it counts (the UTC day of `at`), with the tool calls
    of `tool_uses` counted by tool."""
    cost, priced = cost_of(usage, model, prices)
    payer = payer or Payer()
    return Charge(
        day_of(at),
        chat,
        model,
        kind,
        usage,
        cost,
        priced,
        payer.person,
        payer.client,
        tool_counts(tool_uses),
    )


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """A scope's totals for one model over some days, as the store adds them up."""

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    estimated_calls: int = 0
    cost: float = 0.0


def _ignore(charge: Charge) -> None:
    """Observe nothing."""


@dataclass(frozen=True, slots=True)
class Accounting:
    """How the engine prices its calls, and who hears of each charge once it is stored
    (the metrics)."""

    prices: Prices = field(default_factory=Prices)
    observe: Callable[[Charge], None] = _ignore

    def charge(
        self,
        usage: Usage,
        *,
        model: str,
        kind: CallKind,
        chat: str,
        payer: Payer | None,
        at: float,
        tool_uses: Sequence[ToolUse] = (),
    ) -> Charge:
        """`usage` priced and charged to `chat` and `payer`, with the tool calls that
        `tool_uses` made (those of the reply it is stored with)."""
        return charge_of(
            usage,
            model=model,
            kind=kind,
            chat=chat,
            payer=payer,
            prices=self.prices,
            at=at,
            tool_uses=tool_uses,
        )

    def charge_transcription(
        self, heard: Transcription, *, chat: str, payer: Payer | None, at: float
    ) -> Charge:
        """A transcription's charge (`transcription_usage` says how it is priced)."""
        usage, cost, priced = transcription_usage(heard, self.prices)
        payer = payer or Payer()
        kind = CallKind.TRANSCRIPTION
        return Charge(
            day_of(at), chat, heard.model, kind, usage, cost, priced, payer.person, payer.client
        )


@dataclass(frozen=True, slots=True)
class UsageSummary:
    """Totals over some days, all models together: `estimated` when any call's tokens were
    estimated, `unpriced` the models used that have no price (counted at 0)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    estimated: bool = False
    unpriced: tuple[str, ...] = ()


def summarize(totals: Sequence[UsageTotal], prices: Prices) -> UsageSummary:
    return UsageSummary(
        prompt_tokens=sum(t.prompt_tokens for t in totals),
        completion_tokens=sum(t.completion_tokens for t in totals),
        cost=sum(t.cost for t in totals),
        estimated=any(t.estimated_calls for t in totals),
        unpriced=tuple(t.model for t in totals if prices.of(t.model) is None),
    )


@dataclass(frozen=True, slots=True)
class UsageReport:
    """A person's usage today and this month (UTC), as /usage shows it, with their tool
    calls by tool over the same days."""

    day: str
    today: UsageSummary
    month: UsageSummary
    tools: ToolCalls = field(default_factory=ToolCalls)
