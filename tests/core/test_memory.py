"""Client memory's pure parts: reading a model's facts (JSON, repaired, in text), the caps,
de-duplication, scopes and the prompt budget."""

from __future__ import annotations

import json

from core.domain.facts import (
    MAX_FACT_CHARS,
    MAX_FACTS,
    distinct_facts,
    facts_from_lines,
    facts_from_value,
    facts_value,
    memory_scope,
    parse_facts,
    person_of,
    within_budget,
)


def test_structured_facts_are_read_cleaned_and_deduplicated() -> None:
    """Each fact becomes one line; blanks, non-strings and repeats (any case) are dropped."""
    reply = json.dumps({"facts": ["Lives in  Riga\n", "", 5, "LIVES IN RIGA", "Has a dog"]})
    assert parse_facts(reply) == ["Lives in Riga", "Has a dog"]


def test_broken_or_fenced_json_is_repaired_and_a_bare_list_is_read() -> None:
    """A reply in a code fence, cut off, or a list without its object still gives facts."""
    assert parse_facts('```json\n{"facts": ["Is a nurse"]}\n```') == ["Is a nurse"]
    assert parse_facts('{"facts": ["Is a nurse", "Has two ki') == ["Is a nurse", "Has two ki"]
    assert parse_facts('["Is a nurse"]') == ["Is a nurse"]


def test_a_reply_that_is_no_facts_reads_as_none() -> None:
    """Prose or an object of another shape is not a structured reply."""
    assert parse_facts('{"questions": []}') is None
    assert parse_facts("42") is None


def test_ten_thousand_facts_cost_bounded_work() -> None:
    """A hostile reply gives at most MAX_FACTS facts, each within MAX_FACT_CHARS."""
    reply = json.dumps({"facts": ["z" * 100_000] + [f"fact {n}" for n in range(10_000)]})
    found = parse_facts(reply)
    assert found is not None and len(found) == MAX_FACTS
    assert len(found[0]) == MAX_FACT_CHARS
    lines = facts_from_lines("\n".join(f"- line {n}" for n in range(10_000)))
    assert len(lines) == MAX_FACTS


def test_text_facts_drop_bullets_numbers_and_none() -> None:
    """One fact a line: bullets and numbering go, "none" means nothing."""
    assert facts_from_lines("1. Works nights\n* Has a cat\n\n- none\nнет") == [
        "Works nights",
        "Has a cat",
    ]
    assert facts_from_lines("none") == []


def test_known_facts_are_not_repeated() -> None:
    """A fact equal to one already kept (case and spacing aside) is not new."""
    assert distinct_facts(["Has a cat", "Rides a bike"], known=["has  a CAT"]) == ["Rides a bike"]


def test_scopes_keep_private_and_group_facts_apart_under_one_person() -> None:
    """A group scope's owner names the group; its person is the private one."""
    private, group = memory_scope("tg:7"), memory_scope("tg:7", "tg:-100")
    assert private.owner == "tg:7" and group.owner == "tg:7@tg:-100"
    assert person_of(group.owner) == person_of(private.owner) == "tg:7"
    assert person_of("api:ann@example.com") == "api:ann@example.com"


def test_budget_keeps_whole_newest_facts() -> None:
    """Facts are kept newest first, whole, until the next one would not fit."""
    assert within_budget(["a" * 8, "b" * 8, "c" * 8], 9) == ["a" * 8, "b" * 8]
    assert within_budget(["a" * 400], 10) == []


def test_stored_facts_round_trip_and_damage_reads_as_none() -> None:
    """A consultation's facts are stored as JSON; a damaged value loads as no facts."""
    assert facts_from_value(facts_value(["Лives in Riga"])) == ("Лives in Riga",)
    assert facts_value([]) is None
    assert facts_from_value("{not json") == ()
    assert facts_from_value('{"a": 1}') == ()
