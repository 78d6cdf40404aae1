"""A bot's settings (`core.domain.bots.BotProfile`) are parsed strictly: what is stored reads
back the same, and anything unknown, mistyped or out of range is refused naming the key."""

from __future__ import annotations

import json

import pytest

from core.domain.bots import (
    MAX_INSTRUCTION_CHARS,
    MAX_PROFILE_ROUNDS,
    BotLimits,
    BotProfile,
    ProfileInvalid,
    changed_profile,
    check_label,
    parse_profile,
)


def test_a_profile_round_trips_through_its_json() -> None:
    """Every key a profile sets reads back from its JSON as the same profile."""
    profile = BotProfile(
        rounds=4,
        model="b",
        models=("a", "b"),
        language="pt_BR",
        role="lawyer",
        limits=BotLimits(daily_tokens=0, messages_per_minute=5),
    )
    assert parse_profile(json.loads(json.dumps(profile.to_json()))) == profile
    assert parse_profile({}) == BotProfile()
    assert BotProfile().to_json() == {}


def test_a_profile_is_shown_on_one_line_without_its_instruction() -> None:
    """A list shows each key set, an instruction by its length, `defaults` for none."""
    assert BotProfile().shown() == "defaults"
    shown = BotProfile(instruction="Be brief.\nAlways.", rounds=2, models=("a", "b")).shown()
    assert shown == "instruction=17 chars rounds=2 models=a,b"


@pytest.mark.parametrize(
    ("data", "names"),
    [
        ({"colour": "red"}, "unknown setting 'colour'"),
        ({"rounds": "3"}, "rounds"),
        ({"rounds": True}, "rounds"),
        ({"rounds": 0}, "rounds"),
        ({"rounds": MAX_PROFILE_ROUNDS + 1}, "rounds"),
        ({"rounds": 2.5}, "rounds"),
        ({"role": "a b"}, "role"),
        ({"role": "x" * 101}, "role"),
        ({"role": 3}, "role"),
        ({"role": "lawyer", "instruction": "Be a lawyer."}, "one or the other"),
        ({"instruction": "  "}, "instruction"),
        ({"instruction": "x" * (MAX_INSTRUCTION_CHARS + 1)}, "instruction"),
        ({"instruction": "a\x00b"}, "instruction"),
        ({"models": "a,b"}, "models"),
        ({"models": ["a", "a"]}, "models"),
        ({"models": ["ok", "bad name"]}, "models"),
        ({"models": [f"m{i}" for i in range(21)]}, "models"),
        ({"model": "c", "models": ["a", "b"]}, "model"),
        ({"language": "english"}, "language"),
        ({"language": 7}, "language"),
        ({"limits": [1]}, "limits: an object"),
        ({"limits": {"per_hour": 3}}, "unknown limit 'per_hour'"),
        ({"limits": {"daily_tokens": -1}}, "limits.daily_tokens"),
        ({"limits": {"daily_tokens": 10**13}}, "limits.daily_tokens"),
        ({"limits": {"daily_tokens": "5"}}, "limits.daily_tokens"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(data: dict[str, object], names: str) -> None:
    """A bad key or value raises ProfileInvalid whose message names it."""
    with pytest.raises(ProfileInvalid, match=names):
        parse_profile(data)


def test_settings_that_are_no_object_are_refused() -> None:
    """A JSON list or string as settings is refused, not read as empty."""
    with pytest.raises(ProfileInvalid, match="JSON object"):
        parse_profile(["rounds", 3])  # type: ignore[arg-type]


def test_a_label_is_one_printable_line() -> None:
    """Labels with control characters, line breaks or over 100 characters are refused."""
    assert check_label("Shop — 24/7") == "Shop — 24/7"
    for bad in ("a\nb", "a\x1b[31m", "a\u2028b", "x" * 101, "a\x00"):
        with pytest.raises(ProfileInvalid, match="label"):
            check_label(bad)


def test_changes_as_typed_set_and_unset_keys_and_limits() -> None:
    """`key=value` changes set what they name, an empty value falls back, a role replaces
    an instruction, and a limit is set or unset alone."""
    profile = BotProfile(instruction="Be brief.", rounds=3, limits=BotLimits(daily_tokens=9))
    changed = changed_profile(
        profile,
        {"role": "lawyer", "rounds": "", "limits.monthly_tokens": "100", "models": "a, b"},
    )
    assert changed == BotProfile(
        role="lawyer", models=("a", "b"), limits=BotLimits(daily_tokens=9, monthly_tokens=100)
    )
    assert changed.shown() == (
        "role=lawyer models=a,b limits.daily_tokens=9 limits.monthly_tokens=100"
    )
    assert changed_profile(changed, {"limits.daily_tokens": ""}).limits == BotLimits(
        monthly_tokens=100
    )
    for bad, says in (
        ({"label": "x"}, "unknown setting 'label'"),
        ({"limits.per_hour": "1"}, "unknown setting"),
        ({"limits.daily_tokens": "-1"}, "limits.daily_tokens"),
        ({"role": "a", "instruction": "b"}, "one or the other"),
    ):
        with pytest.raises(ProfileInvalid, match=says):
            changed_profile(profile, bad)


GOLD = {
    "id": "gold",
    "title": {"en": "Gold", "ru": "Золото"},
    "description": "More",
    "stars": 75,
    "days": 7,
    "limits": {"daily_tokens": 0},
    "models": ["model-b"],
}


def test_a_bots_plans_round_trip_and_an_empty_list_sells_nothing() -> None:
    """Plans set read back as the same plans; [] is kept (sells nothing), unset is None
    (the deployment's PLANS); `plans=` as typed sets and unsets them."""
    profile = parse_profile({"plans": [GOLD]})
    assert profile.plans is not None and profile.plans[0].models == ("model-b",)
    assert parse_profile(json.loads(json.dumps(profile.to_json()))) == profile
    assert profile.shown() == "plans=gold"
    none = parse_profile({"plans": []})
    assert none.plans == () and none.to_json() == {"plans": []} and none.shown() == "plans=none"
    assert parse_profile({}).plans is None
    changed = changed_profile(BotProfile(), {"plans": json.dumps([GOLD])})
    assert changed == profile
    assert changed_profile(changed, {"plans": ""}).plans is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("{not json", "plans: not valid JSON"),
        ('{"id": "gold"}', "plans: a JSON list of plans"),
        ('[{"id": "gold", "title": "Gold", "stars": 0}]', "plans: plan 'gold': stars"),
        ('[{"id": "Gold!", "title": "G", "stars": 5}]', "plans: a plan's id is"),
        ('[{"id": "g", "title": "G", "stars": 5, "colour": 1}]', "unknown key 'colour'"),
        ('[{"id": "g", "title": {"ru": "Г"}, "stars": 5}]', "texts by language with en"),
        ('[{"id": "g", "title": {"en": "G", "1x": "?"}, "stars": 5}]', "not a language"),
        ('[{"id": "g", "title": "G", "stars": 5, "models": [""]}]', "models is a list"),
        ("[" * 20_000, "plans: not valid JSON"),
        ("[" + " " * 70_000 + "]", "plans: at most 64000 characters"),
    ],
)
def test_a_bots_bad_plans_are_refused_naming_the_key(value: str, says: str) -> None:
    """Plans are parsed as strictly as PLANS: the refusal names `plans` and what is wrong."""
    with pytest.raises(ProfileInvalid) as refused:
        changed_profile(BotProfile(), {"plans": value})
    assert says in str(refused.value)
