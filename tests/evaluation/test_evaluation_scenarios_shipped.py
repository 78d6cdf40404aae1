"""The scenarios shipped in evaluation/scenarios/ load, and together they cover what the
evaluator is meant to measure: both languages, every built-in role, a group, every user
persona type, and each of the hard cases (vague first message, "final answer now" in
Russian, partial answers, a change of mind, an early finish, a user who wants the answer
at once)."""

from __future__ import annotations

import re

import pytest

from evaluation.scenarios import DEFAULT_SCENARIOS_DIR, PERSONA_TYPES, Scenario, load_scenarios

CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)


@pytest.fixture(scope="module")
def scenarios() -> list[Scenario]:
    return load_scenarios()


def test_at_least_twenty_four_scenarios_in_both_languages(scenarios: list[Scenario]) -> None:
    """Enough scenarios for every persona type and hard case, in English and Russian."""
    assert len(scenarios) >= 24
    languages = [s.language for s in scenarios]
    assert languages.count("ru") >= 6
    assert languages.count("en") >= 6


def test_ids_are_unique_and_match_the_file_names(scenarios: list[Scenario]) -> None:
    ids = [s.id for s in scenarios]
    assert len(ids) == len(set(ids))
    files = sorted(p.stem for p in DEFAULT_SCENARIOS_DIR.glob("*.yaml"))
    assert sorted(ids) == files
    assert not [p.name for p in DEFAULT_SCENARIOS_DIR.iterdir() if p.suffix != ".yaml"]


def test_every_built_in_role_and_the_named_topics_are_covered(scenarios: list[Scenario]) -> None:
    assert {s.role for s in scenarios} >= {
        "coach",
        "lawyer",
        "doctor",
        "finance",
        "engineer",
        "expert",
    }
    topics = {s.id.split("-")[0]: s for s in scenarios}
    assert {"fitness", "legal", "health", "finance", "engineering", "travel", "career"} <= set(
        topics
    )
    for s in scenarios:
        if s.id.startswith(("travel-", "career-")):
            assert s.role == "expert", s.id
    assert "fitness-hammer-curl-en" in {s.id for s in scenarios}


def test_every_persona_type_twice_and_in_both_languages(scenarios: list[Scenario]) -> None:
    """Each ClarifyMT-Bench user type is played at least twice, in English and in Russian."""
    for kind in PERSONA_TYPES:
        played = [s for s in scenarios if s.persona_type == kind]
        assert len(played) >= 2, kind
        assert {s.language for s in played} == {"en", "ru"}, kind


def test_a_group_consultation_with_two_speakers(scenarios: list[Scenario]) -> None:
    groups = [s for s in scenarios if s.is_group]
    assert groups
    for s in groups:
        assert len(s.speakers) >= 2 and all(sp.hidden_facts for sp in s.speakers)


def test_every_hard_case_is_present(scenarios: list[Scenario]) -> None:
    assert any("vague" in s.id for s in scenarios)
    pressed_ru = [
        s
        for s in scenarios
        if s.language == "ru" and s.behaviour.press_final_now_after_round is not None
    ]
    assert pressed_ru
    assert all(any("русском" in item for item in s.rubric) for s in pressed_ru)
    assert any(s.behaviour.answers == "partial" for s in scenarios)
    assert any(s.behaviour.changes_mind is not None for s in scenarios)
    assert any(s.expect.early_finish is True for s in scenarios)
    assert any(s.behaviour.asks_for_answer_immediately for s in scenarios)


def test_behaviour_happens_before_the_last_round(scenarios: list[Scenario]) -> None:
    """A press or a change of mind after the last round would never be played."""
    for s in scenarios:
        press = s.behaviour.press_final_now_after_round
        assert press is None or press < s.max_rounds, s.id
        change = s.behaviour.changes_mind
        assert change is None or change.after_round < s.max_rounds, s.id


def test_each_scenario_is_written_in_its_language(scenarios: list[Scenario]) -> None:
    for s in scenarios:
        texts = [s.first_message, s.persona, *s.rubric]
        if s.language == "ru":
            assert all(CYRILLIC.search(t) for t in texts), s.id
        else:
            assert not any(CYRILLIC.search(t) for t in texts), s.id


def test_each_scenario_has_enough_to_judge(scenarios: list[Scenario]) -> None:
    for s in scenarios:
        assert len(s.rubric) >= 4, s.id
        facts = len(s.hidden_facts) + sum(len(sp.hidden_facts) for sp in s.speakers)
        assert facts >= 2, s.id
