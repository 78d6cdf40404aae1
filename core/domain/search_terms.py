"""The words of a knowledge-base query, as both stores' full-text search takes them.

Invariants: a term is a run of letters, combining marks, digits and private-use
characters (Unicode categories L*, M*, N* and Co: what the SQLite index's tokenizer keeps in
a word), casefolded, so no term holds a quote, an operator, a bracket or a space of any
query syntax; a query is user input and never becomes query syntax. Terms are distinct,
at most `MAX_TERMS` of them (the longest when a query has more, in the query's order) and
each at most `MAX_TERM_CHARS` long; only the first `MAX_QUERY_CHARS` characters are read,
so a search costs the same for a long text as for a paragraph. A query of punctuation
alone has no terms. A search finds its candidates by a query's rarest words only
(`candidate_terms`). Pure.
"""

from __future__ import annotations

import unicodedata

MAX_TERMS = 32
MAX_TERM_CHARS = 64
MAX_QUERY_CHARS = 20_000
_WORD_CATEGORIES = frozenset("LMN")


def search_terms(query: str) -> list[str]:
    """The distinct words of `query` a search looks for."""
    words: list[str] = []
    seen: set[str] = set()
    for word in _words(unicodedata.normalize("NFC", query[:MAX_QUERY_CHARS])):
        term = word.casefold()[:MAX_TERM_CHARS]
        if term not in seen:
            seen.add(term)
            words.append(term)
    if len(words) <= MAX_TERMS:
        return words
    longest = sorted(range(len(words)), key=lambda index: -len(words[index]))[:MAX_TERMS]
    return [words[index] for index in sorted(longest)]


def _words(text: str) -> list[str]:
    """Runs of word characters holding at least one that is not a mark (a mark alone
    is no word: the index's tokenizer may drop it)."""
    found: list[str] = []
    start, based = -1, False
    for index, char in enumerate(text + " "):
        category = unicodedata.category(char)
        if category[0] in _WORD_CATEGORIES or category == "Co":
            if start < 0:
                start, based = index, False
            based = based or category[0] != "M"
        elif start >= 0:
            if based:
                found.append(text[start:index])
            start = -1
    return found


CANDIDATE_BUDGET = 5_000
"""About how many passages a search's candidate words may hold in all: its rarest words
are taken until the next would pass it (the rarest `FEWEST_CANDIDATES` always)."""
FEWEST_CANDIDATES = 3
"""The rarest words a search always takes."""
COMMON_CANDIDATES = 1
"""A query whose every word most passages hold is searched by its rarest word alone: the
others tell passages apart no better, and each would read most of them again."""


def candidate_terms(terms: list[str], held: list[float], total: float) -> list[str]:
    """The words of `terms` that find a search's candidates (`held[i]` passages of the
    `total` hold `terms[i]`: a count or an estimate; 0 is none): those at most half of
    the passages hold (or one: in a knowledge base of one passage every word is rare
    enough), rarest first, for as long as the passages they hold stay within
    `CANDIDATE_BUDGET` and at least the `FEWEST_CANDIDATES` rarest; when every word held
    is more common, the rarest alone (`COMMON_CANDIDATES`); [] when no passage holds any. Ties go
    to the longer word, then to the query's order.

    Why: a consultation's query is a request and a reply, 30 words and more, most of
    them words many passages hold. Matching passages by every word reads thousands of
    them to rank a handful; the rarest words carry the ranking (bm25, or the weights of
    `storage.postgres.knowledge.word_weight`, give common words next to nothing) and
    find the same passages from far fewer candidates. A small knowledge base stays
    within the budget with every rare word."""
    ranked = sorted(
        (index for index, count in enumerate(held) if count > 0),
        key=lambda index: (held[index], -len(terms[index]), index),
    )
    rare = [index for index in ranked if held[index] <= max(total / 2, 1)]
    if not rare:
        return [terms[index] for index in ranked[:COMMON_CANDIDATES]]
    chosen: list[str] = []
    candidates = 0.0
    for index in rare:
        candidates += held[index]
        if candidates > CANDIDATE_BUDGET and len(chosen) >= FEWEST_CANDIDATES:
            break
        chosen.append(terms[index])
    return chosen


def candidate_rounds(terms: list[str], held: list[float], total: float) -> list[list[str]]:
    """The word lists a search tries in turn until one finds a passage the role reads:
    the `candidate_terms`, then once the next rarest of the words some passage holds (the
    rarest may be only in other roles' documents); none when no passage holds any."""
    first = candidate_terms(terms, held, total)
    if not first:
        return []
    rest = [(t, n) for t, n in zip(terms, held, strict=True) if n > 0 and t not in first]
    more = candidate_terms([t for t, _ in rest], [n for _, n in rest], total)
    return [first, more] if more else [first]
