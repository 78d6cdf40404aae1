"""A query's words (`core.domain.search_terms`): letters, marks and digits of every script,
casefolded and distinct; never a quote, operator or bracket; bounded in number and
length, whatever the query's size."""

from __future__ import annotations

import pytest

from core.domain.search_terms import MAX_TERM_CHARS, MAX_TERMS, search_terms


def test_words_of_every_script_casefolded_and_distinct() -> None:
    query = 'Warranty: KETTLES? warranty "kettles" हिन्दी العَرَبِيَّة Café ЧАЙНИК 24-months'
    assert search_terms(query) == [
        "warranty", "kettles", "हिन्दी", "العَرَبِيَّة", "café", "чайник", "24", "months",
    ]  # fmt: skip


@pytest.mark.parametrize("query", ['"', "*", "-", "()", "?!.,;:", "\x00", " ", "\u0301"])
def test_punctuation_alone_is_no_term(query: str) -> None:
    assert search_terms(query) == []


def test_no_term_holds_query_syntax() -> None:
    terms = search_terms("a\"b*c(d)e-f^g:h+i\\j'k&l|m!n<o>p{q}r[s]t")
    assert terms == list("abcdefghijklmnopqrst")


def test_a_long_query_keeps_its_longest_terms_in_order() -> None:
    short = " ".join(f"w{n}" for n in range(100))
    query = f"{short} kettle {short} warranties"
    terms = search_terms(query)
    assert len(terms) == MAX_TERMS
    assert terms[0].startswith("w") and terms[-1] == "warranties"
    assert "kettle" in terms


def test_a_term_and_the_text_read_are_bounded() -> None:
    assert search_terms("x" * 10_000) == ["x" * MAX_TERM_CHARS]
    assert search_terms("a " * 50_000 + "late") == ["a"]
