"""PLANS parsed strictly, and the limits an active plan gives a person."""

from __future__ import annotations

import json

import pytest

from core.domain.plans import PlanLimits, find_plan, models_with_plan, parse_plans
from core.domain.quotas import QuotaConfig, QuotaOverride, limits_for
from core.prompting.requests import EngineConfig, model_of

LANGUAGES = ("en", "ru", "de")
PRO = {
    "id": "pro",
    "title": {"en": "Pro", "ru": "Про"},
    "description": "Fifty consultations a day",
    "stars": 250,
    "days": 30,
    "subscription": True,
    "limits": {"daily_consultations": 50, "daily_tokens": 200000},
    "models": ["gpt-4o"],
}


def parse(*plans: object) -> tuple:
    return parse_plans(json.dumps(list(plans)), LANGUAGES)


def test_a_plan_is_read_with_its_texts_by_language() -> None:
    """A plan's title is in the person's language, else English; its limits as given."""
    (plan,) = parse(PRO)
    assert (plan.id, plan.stars, plan.days, plan.subscription) == ("pro", 250, 30, True)
    assert plan.title("ru") == "Про" and plan.title("de") == "Pro"
    assert plan.description("ru") == "Fifty consultations a day"
    assert plan.limits == PlanLimits(daily_tokens=200000, daily_consultations=50)
    assert plan.models == ("gpt-4o",)
    assert find_plan((plan,), "pro") is plan and find_plan((plan,), "max") is None


def test_empty_plans_sell_nothing() -> None:
    """An empty PLANS is no plans."""
    assert parse_plans("  ", LANGUAGES) == ()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"stars": 0}, "stars"),
        ({"stars": 2.5}, "stars"),
        ({"stars": True}, "stars"),
        ({"stars": 10_001}, "stars"),
        ({"days": 0}, "days"),
        ({"days": 7}, "subscription lasts 30"),
        ({"id": "Pro"}, "id"),
        ({"id": "p" * 33}, "id"),
        ({"title": {"ru": "Про"}}, "title"),
        ({"title": {"en": "Pro", "xx": "?"}}, "not a language"),
        ({"title": ""}, "title"),
        ({"title": "x" * 256}, "title"),
        ({"limits": {"daily_toknes": 5}}, "daily_toknes"),
        ({"limits": {"daily_tokens": -1}}, "limits.daily_tokens"),
        ({"limits": [1]}, "limits"),
        ({"models": "gpt-4o"}, "models"),
        ({"models": ["two words"]}, "models"),
        ({"subscription": "yes"}, "subscription"),
        ({"price": 5}, "unknown key"),
    ],
)
def test_a_bad_plan_is_refused_naming_what_is_wrong(change: dict, says: str) -> None:
    """Every malformed plan is refused with a ValueError naming the key."""
    with pytest.raises(ValueError, match=says):
        parse({**PRO, **change})


def test_malformed_lists_are_refused() -> None:
    """Not JSON, not a list, a non-object entry, a duplicate id, too many plans: refused."""
    for text in ("{", '{"id": "pro"}', "[1]", json.dumps([PRO, PRO])):
        with pytest.raises(ValueError, match=r"JSON|plan"):
            parse_plans(text, LANGUAGES)
    many = [{**PRO, "id": f"p{n}"} for n in range(21)]
    with pytest.raises(ValueError, match="at most"):
        parse_plans(json.dumps(many), LANGUAGES)


def test_an_active_plan_replaces_the_deployments_limits_it_names() -> None:
    """A plan's limits replace the deployment's it names; the rest stay the deployment's."""
    config = QuotaConfig(
        user_daily_tokens=1000, user_monthly_tokens=9000, user_daily_consultations=2
    )
    plan = ("pro", PlanLimits(daily_consultations=50, daily_tokens=0))
    limits = limits_for(config, "tg:7", None, plan)
    assert (limits.daily_tokens, limits.monthly_tokens, limits.daily_consultations) == (0, 9000, 50)
    assert limits.plan == "pro"


def test_an_override_and_an_exemption_still_win_over_a_plan() -> None:
    """An operator's override of daily tokens, and an exemption, stand over a plan."""
    config = QuotaConfig(user_daily_tokens=1000, exempt=frozenset({"tg:1"}))
    plan = ("pro", PlanLimits(daily_tokens=5000))
    assert limits_for(config, "tg:7", QuotaOverride("tg:7", 10), plan).daily_tokens == 10
    assert limits_for(config, "tg:7", QuotaOverride("tg:7", None), plan).exempt
    assert limits_for(config, "tg:1", None, plan).exempt


def test_a_plans_models_come_first_and_its_first_is_the_default() -> None:
    """The plan's models lead the choices (each once) and the first is the default; a plan
    listing none leaves the default and the choices as they were."""
    assert models_with_plan("base", ("base", "o3"), ("o3", "gpt-4o")) == (
        "o3",
        ("o3", "gpt-4o", "base"),
    )
    assert models_with_plan("base", ("base",), ()) == ("base", ("base",))


def test_a_config_for_a_plan_allows_its_models_and_falls_back_without_it() -> None:
    """With the plan: its model chosen is called; without it the same choice is not, the
    deployment's default is (`model_of`)."""
    config = EngineConfig(model="base", models=("base", "sonar"))
    with_plan = config.for_plan(("gpt-4o",))
    assert model_of(None, with_plan) == "gpt-4o"
    assert model_of("sonar", with_plan) == "sonar"
    assert model_of("gpt-4o", with_plan) == "gpt-4o"
    assert model_of("gpt-4o", config) == "base"
    assert config.for_plan(()) is config
