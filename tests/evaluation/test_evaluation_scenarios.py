"""Scenario files: loaded into plain dataclasses, every mistake named by file and field path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from evaluation.scenarios import (
    DEFAULT_SCENARIOS_DIR,
    PERSONA_TYPES,
    Scenario,
    ScenarioError,
    load_scenario,
    load_scenarios,
)

HERE = Path(__file__).resolve().parent / "evaluation_scenarios"

VALID = {
    "id": "x-en",
    "title": "A title",
    "language": "en",
    "role": "coach",
    "first_message": "Help me.",
    "persona": "Someone.",
    "hidden_facts": ["A fact."],
    "goal": "A goal.",
    "rubric": ["One point.", "Another point."],
}


def write(folder: Path, data: object, name: str = "x-en") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def error_of(folder: Path, data: object, name: str = "x-en") -> str:
    path = write(folder, data, name)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    return str(caught.value)


def test_the_test_scenarios_load_sorted_by_id_with_defaults_and_behaviour() -> None:
    scenarios = load_scenarios(HERE)
    assert [s.id for s in scenarios] == ["hammer-curl-en", "trip-group-ru"]
    curl, trip = scenarios
    assert curl.language == "en" and curl.role == "coach" and curl.max_rounds == 3
    assert curl.hidden_facts[0] == "Has a 2 kg and a 5 kg dumbbell at home, nothing else."
    assert curl.behaviour.answers == "all" and curl.behaviour.press_final_now_after_round is None
    assert curl.speakers == () and not curl.is_group
    assert trip.language == "ru" and trip.behaviour.press_final_now_after_round == 1
    assert [s.name for s in trip.speakers] == ["Анна", "Борис"] and trip.is_group
    assert trip.speakers[1].hidden_facts == ("У Бориса аллергия на кошек.",)


def test_optional_fields_take_their_defaults(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, VALID))
    assert scenario == Scenario(
        id="x-en",
        title="A title",
        language="en",
        role="coach",
        max_rounds=3,
        first_message="Help me.",
        persona="Someone.",
        hidden_facts=("A fact.",),
        goal="A goal.",
        rubric=("One point.", "Another point."),
    )
    assert scenario.expect.early_finish is None
    assert scenario.behaviour.changes_mind is None
    assert scenario.persona_type == "precise"


@pytest.mark.parametrize("kind", PERSONA_TYPES)
def test_every_persona_type_is_read(tmp_path: Path, kind: str) -> None:
    """Each of the six ClarifyMT-Bench user types loads as written."""
    assert load_scenario(write(tmp_path, {**VALID, "persona_type": kind})).persona_type == kind


def test_every_behaviour_and_expectation_is_read(tmp_path: Path) -> None:
    data = {
        **VALID,
        "max_rounds": 5,
        "behaviour": {
            "answers": "partial",
            "press_final_now_after_round": 2,
            "asks_for_answer_immediately": True,
            "changes_mind": {"after_round": 1, "change": "New goal."},
        },
        "expect": {"early_finish": True},
    }
    scenario = load_scenario(write(tmp_path, data))
    assert scenario.max_rounds == 5
    assert scenario.behaviour.answers == "partial"
    assert scenario.behaviour.press_final_now_after_round == 2
    assert scenario.behaviour.asks_for_answer_immediately is True
    assert scenario.behaviour.changes_mind is not None
    assert scenario.behaviour.changes_mind.after_round == 1
    assert scenario.behaviour.changes_mind.change == "New goal."
    assert scenario.expect.early_finish is True


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"behaviour": {"answers": "some"}}, 'behaviour.answers: must be "all" or "partial"'),
        ({"colour": "red"}, "colour: unknown key"),
        ({"behaviour": {"answer": "all"}}, "behaviour.answer: unknown key"),
        ({"language": "de"}, 'language: must be "en" or "ru"'),
        (
            {"role": "wizard"},
            "role: must be one of coach, doctor, engineer, expert, finance, lawyer",
        ),
        ({"max_rounds": 11}, "max_rounds: must be a whole number from 1 to 10"),
        ({"max_rounds": True}, "max_rounds: must be a whole number from 1 to 10"),
        ({"first_message": "   "}, "first_message: must not be blank"),
        ({"hidden_facts": []}, "hidden_facts: must list at least 1 item"),
        ({"rubric": ["only one"]}, "rubric: must list at least 2 items"),
        ({"rubric": ["ok", 3]}, "rubric[1]: must be text"),
        ({"goal": None}, "goal: is required"),
        ({"id": "X_en"}, "id: must be lowercase letters, digits and dashes"),
        ({"id": "other"}, 'id: must equal the file name without .yaml ("x-en")'),
        (
            {"behaviour": {"changes_mind": {"after_round": 1}}},
            "behaviour.changes_mind.change: is required",
        ),
        (
            {"speakers": [{"name": "Ann", "persona": "p", "hidden_facts": ["f"]}]},
            "speakers: must list at least 2 items",
        ),
        (
            {
                "speakers": [
                    {"name": "Ann", "persona": "p", "hidden_facts": ["f"]},
                    {"name": "Ann", "persona": "q", "hidden_facts": ["g"]},
                ]
            },
            'speakers[1].name: "Ann" is used twice',
        ),
        (
            {
                "speakers": [
                    {"name": "Ann", "persona": "p", "hidden_facts": ["f"]},
                    {"name": "Bob", "persona": "q", "hidden_facts": ["g"], "age": 3},
                ]
            },
            "speakers[1].age: unknown key",
        ),
        ({"expect": {"early_finish": "yes"}}, "expect.early_finish: must be true or false"),
        (
            {"persona_type": "grumpy"},
            "persona_type: must be one of precise, vague, off-focus, contradictory, "
            "factually-wrong, refusing",
        ),
        (
            {"persona_type": "Vague"},
            "persona_type: must be one of precise, vague, off-focus, contradictory, "
            "factually-wrong, refusing",
        ),
        (
            {"persona_type": ["vague"]},
            "persona_type: must be one of precise, vague, off-focus, contradictory, "
            "factually-wrong, refusing",
        ),
        ({"behaviour": {"persona_type": "vague"}}, "behaviour.persona_type: unknown key"),
    ],
)
def test_a_bad_field_is_named_with_the_file(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    data = {key: value for key, value in {**VALID, **change}.items() if value is not None}
    error = error_of(tmp_path, data)
    assert error == f"{tmp_path / 'x-en.yaml'}: {message}"


def test_a_file_that_is_not_a_mapping_or_not_yaml_is_an_error(tmp_path: Path) -> None:
    assert error_of(tmp_path, ["a", "list"]).endswith("x-en.yaml: must be a mapping of fields")
    broken = tmp_path / "broken.yaml"
    broken.write_text("id: [unclosed\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"broken\.yaml: not valid YAML"):
        load_scenario(broken)


def test_a_folder_without_scenarios_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no scenario files"):
        load_scenarios(tmp_path)
    write(tmp_path, VALID)
    assert [s.id for s in load_scenarios(tmp_path)] == ["x-en"]


def test_the_default_folder_is_the_package_s_scenarios() -> None:
    root = Path(__file__).resolve().parents[2]
    assert root / "evaluation" / "scenarios" == DEFAULT_SCENARIOS_DIR
