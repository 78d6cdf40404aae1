"""The words of a knowledge-base query, as both stores' full-text search takes them.

Invariants: a term is a run of letters, combining marks, digits and private-use
characters (Unicode categories L*, M*, N* and Co: what the SQLite index's tokenizer keeps in
a word), casefolded, so no term holds a quote, an operator, a bracket or a space of any
query syntax; a query is user input and never becomes query syntax. Terms are distinct,
at most `MAX_TERMS` of them (the longest when a query has more, in the query's order) and
each at most `MAX_TERM_CHARS` long; only the first `MAX_QUERY_CHARS` characters are read,
so a search costs the same for a long text as for a paragraph. A query of punctuation
alone has no terms. Pure.
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
