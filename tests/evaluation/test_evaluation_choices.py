"""The simulated user's choices among a round's options, read from what its model wrote:
labels in the forms models write them, and everything else kept as typed text."""

from __future__ import annotations

import pytest

from core.domain.clarifying import Answer, ClarifyingRound, Question, option_label, option_lines
from evaluation.choices import Choices, read_choices

ROUND = ClarifyingRound(
    "Two things.",
    (
        Question("What is your budget?", ("Under 500", "500–1000", "Over 1000")),
        Question("Which city?", ()),
        Question("How soon?", ("This week", "This month")),
    ),
)


def test_labels_and_option_lines_number_questions_and_letter_options() -> None:
    """Options are listed `1a) …` per question in order; a question without options has none."""
    assert option_label(2, 3) == "2c"
    assert option_lines([q.options for q in ROUND.questions]) == [
        "1a) Under 500",
        "1b) 500–1000",
        "1c) Over 1000",
        "3a) This week",
        "3b) This month",
    ]
    assert option_lines([(), ()]) == []


@pytest.mark.parametrize(
    "line",
    [
        "1b",
        "1B",
        " 1b) ",
        "1b.",
        "(1b)",
        '"1b"',
        "**1b**",
        "1 b",
        "1b) 500–1000",
        "1b: 500-1000".replace("-", "–"),
        "1b) 500",  # the option's text cut short
        "1б",  # Cyrillic б: the second letter
    ],
)
def test_a_label_in_any_usual_form_is_a_choice(line: str) -> None:
    """The label alone, wrapped in quotes or markdown, or followed by the option's text."""
    assert read_choices(line, ROUND) == Choices((Answer(1, option=2),), "")


def test_cyrillic_look_alikes_count_as_their_latin_letters() -> None:
    """A Russian model's "1с" (Cyrillic es) is 1c, "3а" is 3a."""
    assert read_choices("1с\n3а", ROUND).answers == (Answer(1, option=3), Answer(3, option=1))


def test_choices_come_in_the_questions_order_and_the_rest_is_typed() -> None:
    """Choices for several questions, a later one for the same question replacing the
    first, and the remaining lines kept in order as the typed text."""
    text = "3b\nWe live in Porto.\n1a\n1c\nThanks!"
    assert read_choices(text, ROUND) == Choices(
        (Answer(1, option=3), Answer(3, option=2)), "We live in Porto.\nThanks!"
    )


@pytest.mark.parametrize(
    "text",
    [
        "4a",  # no question 4
        "2a",  # question 2 has no options
        "1d",  # question 1 has three
        "1z",
        "0a",
        "1b) Under 500",  # the text after the label is another option's
        "1b) 500–1000 but maybe more",  # more than the option says
        "12 apples",
        "2 boxes",
        "3 e-mails",
        "1. Under 500",  # numbered text, no letter
        "",
        "   ",
        '{"answers": [[1, 2]]}',
    ],
)
def test_a_line_that_names_no_option_of_the_round_stays_typed(text: str) -> None:
    """Nothing is guessed: the line reaches the bot as written."""
    assert read_choices(text, ROUND) == Choices((), text.strip())


def test_hostile_text_is_read_in_one_pass_and_kept_whole() -> None:
    """A huge message, control characters and lone labels of rounds that do not exist
    neither raise nor lose text."""
    junk = "\x00\u202e" + "9z " * 50_000
    text = f"{junk}\n1a\n" + "2b\n" * 1000 + "x" * 100_000
    found = read_choices(text, ROUND)
    assert found.answers == (Answer(1, option=1),)
    assert found.typed.startswith(junk.strip()) and found.typed.endswith("x" * 100_000)
    assert found.typed.count("2b") == 1000


def test_a_round_without_options_has_no_choices() -> None:
    """Labels mean nothing when nothing was offered."""
    bare = ClarifyingRound("", (Question("Which city?"),))
    assert read_choices("1a", bare) == Choices((), "1a")
