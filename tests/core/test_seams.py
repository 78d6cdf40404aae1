"""Where a continuation meets the answer it continues (`core.llm.seams.join`): glued when it
goes on with the word, a space or a paragraph break when it starts a sentence or a block."""

from __future__ import annotations

import pytest

from core.llm.seams import join


@pytest.mark.parametrize(
    ("text", "fragment", "joined"),
    [
        ("Sign in with O", "Auth tokens.", "Sign in with OAuth tokens."),
        ("Use the XML", "HttpRequest object.", "Use the XMLHttpRequest object."),
    ],
)
def test_a_capitalised_fragment_after_a_capital_goes_on_with_the_word(
    text: str, fragment: str, joined: str
) -> None:
    """A word whose capitals run on ("OAuth", "XMLHttpRequest") may be cut right after a
    capital, and what follows looks like a sentence's start: after a capital it is glued,
    as a continuation that goes on with the word (a continuation may start mid-word)."""
    assert join(text, fragment) == joined


def test_the_same_fragment_after_a_lowercase_word_starts_a_new_sentence() -> None:
    """After a word in lower case a capital followed by lower case starts a sentence: a
    restart, which gets a space instead of being glued to the word."""
    assert join("Sign in with your account", "Then open the settings.") == (
        "Sign in with your account Then open the settings."
    )
