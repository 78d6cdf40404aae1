"""A query's words (`core.domain.search_terms`): letters, marks and digits of every script,
casefolded and distinct; never a quote, operator or bracket; bounded in number and
length, whatever the query's size."""

from __future__ import annotations

import pytest

from core.domain.search_terms import (
    CANDIDATE_BUDGET,
    FEWEST_CANDIDATES,
    MAX_TERM_CHARS,
    MAX_TERMS,
    candidate_rounds,
    candidate_terms,
    search_terms,
)


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


def test_candidates_are_the_rarest_words_some_passage_holds() -> None:
    terms = ["the", "kettle", "warranty", "zzz", "is", "limescale"]
    held = [900, 12, 40, 0, 950, 3]
    assert candidate_terms(terms, held, 1000) == ["limescale", "kettle", "warranty"]
    assert FEWEST_CANDIDATES == 3


def test_rare_words_are_taken_within_the_budget_ties_to_the_longer_word() -> None:
    terms = [f"w{'x' * n}" for n in range(12)]
    held = [CANDIDATE_BUDGET / 4] * 12
    chosen = candidate_terms(terms, held, 100_000)
    assert chosen == sorted(terms, key=len, reverse=True)[:4]


def test_the_rarest_few_are_taken_whatever_the_budget() -> None:
    terms = ["alpha", "beta", "gamma", "delta"]
    held = [CANDIDATE_BUDGET * 2.0, CANDIDATE_BUDGET * 3.0, CANDIDATE_BUDGET * 1.0, 9e9]
    assert candidate_terms(terms, held, 1e10) == ["gamma", "alpha", "beta"]


def test_a_small_knowledge_base_takes_every_rare_word() -> None:
    """38 passages: a word three hold ("instalments") is taken with those one holds."""
    terms = ["what", "each", "month", "instalments", "the", "pay"]
    held = [1, 1, 1, 3, 30, 2]
    assert candidate_terms(terms, held, 38) == ["month", "what", "each", "pay", "instalments"]


def test_a_query_of_common_words_is_searched_by_its_rarest_alone() -> None:
    terms = ["the", "on", "a", "is", "of"]
    assert candidate_terms(terms, [990, 600, 995, 700, 800], 1000) == ["on"]


def test_no_candidate_when_no_passage_holds_a_word() -> None:
    assert candidate_terms(["zzz", "qqq"], [0, 0], 1000) == []
    assert candidate_terms([], [], 1000) == []


def test_in_a_knowledge_base_of_one_passage_every_word_it_holds_is_a_candidate() -> None:
    assert candidate_terms(["kettle", "price"], [1, 1], 1) == ["kettle", "price"]


def test_a_search_tries_the_rarest_words_then_the_next_rarest_once() -> None:
    terms = ["alpha", "beta", "gamma", "delta", "zzz"]
    held = [CANDIDATE_BUDGET, CANDIDATE_BUDGET, CANDIDATE_BUDGET, CANDIDATE_BUDGET, 0]
    assert candidate_rounds(terms, held, 1e9) == [["alpha", "gamma", "delta"], ["beta"]]
    assert candidate_rounds(["kettle"], [3], 10) == [["kettle"]]
    assert candidate_rounds(["zzz"], [0], 10) == []
