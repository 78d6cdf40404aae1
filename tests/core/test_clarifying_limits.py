"""A clarifying round as `core.domain.clarifying.read_round` keeps it: exactly at its limits, and
without the format characters a model may write (zero-width, bidi overrides)."""

from __future__ import annotations

import json
import unicodedata

from core.domain.clarifying import (
    MAX_OPTION_CHARS,
    MAX_OPTIONS,
    MAX_QUESTIONS,
    ClarifyingRound,
    Question,
    parse_reply,
    read_round,
)


def asked(*questions: tuple[str, list[str]], preamble: str = "") -> dict[str, object]:
    return {
        "preamble": preamble,
        "questions": [{"text": text, "options": options} for text, options in questions],
        "ready_for_final": False,
    }


def test_the_limit_of_questions_keeps_the_last_one_in_and_drops_the_next() -> None:
    """The round keeps `MAX_QUESTIONS` (4) questions: the fourth stays, the fifth goes."""
    value = asked(*[(f"Question {n}?", []) for n in range(1, MAX_QUESTIONS + 2)])
    found = read_round(value)

    assert found is not None
    assert [q.text for q in found.questions] == [
        f"Question {n}?" for n in range(1, MAX_QUESTIONS + 1)
    ]
    assert MAX_QUESTIONS == 4


def test_an_option_of_exactly_the_limit_stays_and_one_character_more_goes() -> None:
    """An option of `MAX_OPTION_CHARS` (40) characters is kept whole; one of 41 is dropped
    (not cut: a cut option could say something else)."""
    at_limit = "a" * (MAX_OPTION_CHARS - 1) + "z"
    over = "b" * MAX_OPTION_CHARS + "z"
    found = read_round(asked(("Which?", [at_limit, over, "Short"])))

    assert found is not None
    assert found.questions[0].options == (at_limit, "Short")
    assert len(at_limit) == MAX_OPTION_CHARS == 40


def test_the_limit_of_options_keeps_five() -> None:
    """`MAX_OPTIONS` (5) options stay; the sixth goes."""
    options = [f"Option {n}" for n in range(1, MAX_OPTIONS + 2)]
    found = read_round(asked(("Which?", options)))

    assert found is not None and found.questions[0].options == tuple(options[:MAX_OPTIONS])


def test_format_characters_are_removed_and_what_is_left_is_one_option() -> None:
    """Zero-width and bidi characters are removed from questions, options and the
    preamble; what then reads the same is one option, and one question."""
    hidden = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u202e\u202d\u2066\u2069\u061c"
    assert all(unicodedata.category(c) == "Cf" for c in hidden)
    value = asked(
        (f"Bud{hidden}get?", ["Ye\u200bs", "Yes", "\u202eNo", "No", "N\u00ado"]),
        ("\u2066Budget?\u2069", ["Other"]),
        ("City?", [hidden, "Rome"]),
        preamble=f"Two{hidden} facts.",
    )
    found = read_round(value)

    assert found == ClarifyingRound(
        "Two facts.", (Question("Budget?", ("Yes", "No")), Question("City?", ("Rome",)))
    )


def test_a_question_made_only_of_format_characters_is_no_question() -> None:
    """A question that is nothing but format characters is blank, so a reply holding only
    such questions is no round."""
    assert read_round(asked(("\u200b\u202e\u2066", ["Yes"]))) is None
    assert parse_reply(json.dumps(asked(("\u200b", []), ("Real?", [])))) == ClarifyingRound(
        "", (Question("Real?"),)
    )


def test_format_characters_do_not_count_towards_an_options_length() -> None:
    """An option of 40 visible characters with zero-width characters among them is kept."""
    visible = "x" * MAX_OPTION_CHARS
    found = read_round(asked(("Which?", ["\u200b".join(visible[:10]) + visible[10:]])))

    assert found is not None and found.questions[0].options == (visible,)


def test_a_flood_of_format_characters_is_read_within_the_fields_bound() -> None:
    """A megabyte of zero-width characters before a question's words: only the field's
    bounded head is read (four times its limit), so the question is blank and dropped."""
    flood = "\u200b" * 1_000_000
    found = read_round(asked((flood + "Hidden?", [flood + "Yes"]), ("Shown?", [])))

    assert found == ClarifyingRound("", (Question("Shown?"),))
