"""Plans a person buys with Telegram Stars (`PLANS`), and the limits an active one gives.

Invariants:
- `parse_plans` is strict: a JSON list of objects with only the documented keys; an `id`
  of 1-32 of `a-z 0-9 _ -`, unique; a title (and an optional description) as one text or
  per language (a code of `languages`, English required then); `stars` an integer from 1 to
  `MAX_STARS`; `days` an integer from 1 to `MAX_DAYS` (a subscription's is 30: Telegram
  renews a Stars subscription every 30 days); `limits` only the quota's keys, each an
  integer of 0 (no limit) or more; `models` a list of model names. Anything else is a
  ValueError naming the plan and the key, so the start stops with one line.
- A limit a plan does not name is the deployment's (`plan_limits`); an active plan
  replaces the deployment's limits, never an operator's override or exemption (those are
  a person's own word, `core.domain.quotas.limits_for`).
- A plan's `models` are added to what a person may choose, first (`models_with_plan`): the
  plan's first model is the person's default, a model the person chose among the
  deployment's (or the bot's) stays theirs, and when the plan ends or is refunded a plan's
  model chosen is no longer allowed, so the deployment's default is called again.
Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

SUBSCRIPTION_DAYS = 30
SUBSCRIPTION_PERIOD_SECONDS = 2_592_000
"""The one period Telegram allows for a Stars subscription (30 days)."""
MAX_STARS = 10_000
"""The most a plan may cost: Telegram's cap on a Stars subscription's price."""
MAX_DAYS = 3_660
MAX_PLANS = 20
MAX_TEXT_CHARS = 255
"""Telegram's limit on an invoice's description; titles are cut to 32 when sent."""
DAY_SECONDS = 86_400

_PLAN_ID = re.compile(r"[a-z0-9_-]{1,32}")
_LANGUAGE = re.compile(r"[a-z]{2,3}(_[A-Za-z]{2,4})?")
_KEYS = frozenset(
    {"id", "title", "description", "stars", "days", "subscription", "limits", "models"}
)
LIMIT_KEYS = ("daily_tokens", "monthly_tokens", "daily_consultations")
"""The quota limits a plan may set (`core.domain.quotas.PersonLimits`' names)."""


@dataclass(frozen=True, slots=True)
class PlanLimits:
    """A plan's limits; None: the deployment's limit applies; 0: no limit."""

    daily_tokens: int | None = None
    monthly_tokens: int | None = None
    daily_consultations: int | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """One plan as PLANS describes it; texts as (language, text) pairs, English first."""

    id: str
    titles: tuple[tuple[str, str], ...]
    descriptions: tuple[tuple[str, str], ...]
    stars: int
    days: int
    subscription: bool = False
    limits: PlanLimits = PlanLimits()
    models: tuple[str, ...] = ()

    def title(self, language: str) -> str:
        return _in(self.titles, language)

    def description(self, language: str) -> str:
        return _in(self.descriptions, language) or self.title(language)

    @property
    def seconds(self) -> float:
        """How long one purchase lasts."""
        return float(self.days * DAY_SECONDS)


def _in(texts: tuple[tuple[str, str], ...], language: str) -> str:
    """The text in `language`, else English (the first), else nothing."""
    for code, text in texts:
        if code == language:
            return text
    return texts[0][1] if texts else ""


def models_with_plan(
    default: str, allowed: tuple[str, ...], plan_models: tuple[str, ...]
) -> tuple[str, tuple[str, ...]]:
    """The default model and the models a person may choose when their active plan lists
    `plan_models` (empty: no plan, or one listing none: `default` and `allowed` as given)."""
    if not plan_models:
        return default, allowed
    return plan_models[0], tuple(dict.fromkeys((*plan_models, *allowed)))


def find_plan(plans: Iterable[Plan], plan_id: str) -> Plan | None:
    return next((plan for plan in plans if plan.id == plan_id), None)


def _int(plan: str, key: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"plan {plan!r}: {key} must be an integer from {low} to {high}")
    return value


def plan_json(plan: Plan) -> dict[str, Any]:
    """`plan` as PLANS writes it: `parse_plans` reads it back as the same plan."""
    data: dict[str, Any] = {"id": plan.id, "title": dict(plan.titles)}
    if plan.descriptions:
        data["description"] = dict(plan.descriptions)
    data |= {"stars": plan.stars, "days": plan.days, "subscription": plan.subscription}
    limits = {key: getattr(plan.limits, key) for key in LIMIT_KEYS}
    data["limits"] = {key: value for key, value in limits.items() if value is not None}
    if plan.models:
        data["models"] = list(plan.models)
    return data


def _texts(
    plan: str, key: str, value: Any, languages: frozenset[str] | None
) -> tuple[tuple[str, str], ...]:
    """One text, or {language: text} with English: as pairs, English first."""
    if isinstance(value, str):
        value = {"en": value}
    if not isinstance(value, dict) or "en" not in value:
        raise ValueError(f"plan {plan!r}: {key} is a text, or texts by language with en")
    pairs = []
    for code, text in value.items():
        if not isinstance(code, str) or (
            code not in languages if languages is not None else not _LANGUAGE.fullmatch(code)
        ):
            raise ValueError(f"plan {plan!r}: {key} in {str(code)[:20]!r}, not a language")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT_CHARS:
            raise ValueError(f"plan {plan!r}: {key}[{code}] is 1-{MAX_TEXT_CHARS} characters")
        pairs.append((code, text.strip()))
    pairs.sort(key=lambda pair: pair[0] != "en")
    return tuple(pairs)


def _limits(plan: str, value: Any) -> PlanLimits:
    if not isinstance(value, dict):
        raise ValueError(f"plan {plan!r}: limits is an object of {', '.join(LIMIT_KEYS)}")
    unknown = sorted(str(key)[:40] for key in value if key not in LIMIT_KEYS)
    if unknown:
        raise ValueError(f"plan {plan!r}: limits has no {unknown[0]!r} ({', '.join(LIMIT_KEYS)})")
    numbers = {key: _int(plan, f"limits.{key}", n, 0, 10**12) for key, n in value.items()}
    return PlanLimits(**numbers)


def _models(plan: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(name, str) and 0 < len(name) <= 100 and not any(c.isspace() for c in name)
        for name in value
    ):
        raise ValueError(f"plan {plan!r}: models is a list of model names")
    return tuple(dict.fromkeys(value))


def _plan(entry: Any, languages: frozenset[str] | None) -> Plan:
    if not isinstance(entry, dict):
        raise ValueError("each plan is a JSON object")
    plan_id = entry.get("id")
    if not isinstance(plan_id, str) or not _PLAN_ID.fullmatch(plan_id):
        raise ValueError(f"a plan's id is 1-32 of a-z, 0-9, _ and -, not {str(plan_id)[:40]!r}")
    unknown = sorted(str(key)[:40] for key in entry if key not in _KEYS)
    if unknown:
        raise ValueError(f"plan {plan_id!r}: unknown key {unknown[0]!r}")
    subscription = entry.get("subscription", False)
    if not isinstance(subscription, bool):
        raise ValueError(f"plan {plan_id!r}: subscription is true or false")
    days = _int(plan_id, "days", entry.get("days", SUBSCRIPTION_DAYS), 1, MAX_DAYS)
    if subscription and days != SUBSCRIPTION_DAYS:
        raise ValueError(f"plan {plan_id!r}: a subscription lasts {SUBSCRIPTION_DAYS} days")
    if "title" not in entry:
        raise ValueError(f"plan {plan_id!r}: title is required")
    return Plan(
        id=plan_id,
        titles=_texts(plan_id, "title", entry["title"], languages),
        descriptions=(
            _texts(plan_id, "description", entry["description"], languages)
            if "description" in entry
            else ()
        ),
        stars=_int(plan_id, "stars", entry.get("stars"), 1, MAX_STARS),
        days=days,
        subscription=subscription,
        limits=_limits(plan_id, entry.get("limits", {})),
        models=_models(plan_id, entry.get("models", [])),
    )


def parse_plans(text: str, languages: Iterable[str] | None) -> tuple[Plan, ...]:
    """PLANS as plans (empty text: none); ValueError naming what is wrong. `languages`: the
    codes a text may be in (None: any code of a language's shape, `en`, `pt_BR`: where the
    interface's languages are not known, a stored bot's settings)."""
    if not text.strip():
        return ()
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg}") from None
    if not isinstance(entries, list):
        raise ValueError("a JSON list of plans")
    if len(entries) > MAX_PLANS:
        raise ValueError(f"at most {MAX_PLANS} plans")
    codes = None if languages is None else frozenset(languages)
    plans = tuple(_plan(entry, codes) for entry in entries)
    ids = [plan.id for plan in plans]
    for plan_id in ids:
        if ids.count(plan_id) > 1:
            raise ValueError(f"plan {plan_id!r} is listed twice")
    return plans


@dataclass(frozen=True, slots=True)
class ActivePlan:
    """A person's plan and when it ends (Unix time); `charge_id` the payment that set it;
    `renewal_cancelled_at` when its subscription was cancelled (it runs to `ends_at` and is
    not renewed; None: it renews, or is no subscription)."""

    person: str
    plan_id: str
    ends_at: float
    charge_id: str = ""
    renewal_cancelled_at: float | None = None

    def active(self, now: float) -> bool:
        return self.ends_at > now
