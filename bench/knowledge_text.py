"""A knowledge base of made-up documents for the retrieval phase, and the queries it is timed by.

Words are drawn from a vocabulary with a Zipf-like distribution (the word of rank r is drawn
with weight 1 / r^1.07, as words of real prose are): a few dozen English function words lead
it ("the", "of", "and" end up in nearly every passage, as in real documents), then
pronounceable made-up words, so a search meets what it meets in a manual — a handful of
words in every passage, a long tail of words in a few. Each document has a title and
numbered sections with headings, and is cut into passages of at most `CHUNK_CHARS`
characters (the size `core.domain.chunking` cuts real documents to).

Invariants: everything is a function of the seed (`random.Random(seed)`, never the global
generator), so two runs with the same seed build the same knowledge base and time the
same queries; a passage never exceeds `CHUNK_CHARS`; `topic` words, when given, are
written into a share of the passages (a sentence of four of them), few enough that a
search does not count them as common words, so a query holding them finds passages. Pure.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from core.domain.knowledge import Chunk, NewDocument

CHUNK_CHARS = 800
ZIPF_EXPONENT = 1.07
VOCABULARY = 30_000
_FUNCTION_TEXT = (
    "the of and to a in is for that with on as it be are by this or from at an not can "
    "if your you which when should must will may have has each any all its more than "
    "one two no only other also into before after"
)
FUNCTION_WORDS = _FUNCTION_TEXT.split()
"""The head of the vocabulary: what every passage of real prose holds."""
_SOUNDS = (
    "b c d f g h j k l m n p r s t v w z br cl dr fl gr pl pr st tr sh ch th|a e i o u ai ea io ou"
)
_ONSETS, _VOWELS = (part.split() for part in _SOUNDS.split("|"))
_CODAS = ["", "", "", "", "n", "r", "s", "l", "m", "t", "nd", "st", "rk"]

QUERY_KINDS = ("rare", "common", "consultation")
"""How a query is made: a few words of the vocabulary's tail; only words of its head (held
by most passages: the costly case); a request plus a reply, as a turn searches."""


@dataclass(frozen=True)
class Query:
    kind: str  # one of QUERY_KINDS
    text: str


class Corpus:
    """The vocabulary, its Zipf weights and the random stream every text is drawn from."""

    def __init__(
        self, seed: int, topic: Sequence[str] = (), topic_share: float = 0.3, stream: int = 0
    ) -> None:
        self.words = _vocabulary(random.Random(seed), VOCABULARY)
        self.random = random.Random(f"{seed}:{stream}")  # documents and queries: their own
        weights = [1.0 / (rank**ZIPF_EXPONENT) for rank in range(1, len(self.words) + 1)]
        self.cumulative = list(itertools.accumulate(weights))
        self.topic = list(topic)
        self.topic_share = topic_share

    def draw(self, count: int) -> list[str]:
        return self.random.choices(self.words, cum_weights=self.cumulative, k=count)

    def sentence(self, words: int) -> str:
        text = " ".join(self.draw(words))
        return text[:1].upper() + text[1:] + "."

    def heading(self) -> str:
        """A few words of the middle of the vocabulary, capitalised: what a heading names."""
        words = self.random.sample(self.words[200:5000], self.random.randint(1, 4))
        return " ".join(word.capitalize() for word in words)

    def passage(self) -> str:
        """Sentences up to `CHUNK_CHARS` characters: 650 to 800 of them, in two or three
        paragraphs."""
        target = self.random.randint(650, CHUNK_CHARS)
        topical = bool(self.topic) and self.random.random() < self.topic_share
        if topical:
            target -= 60  # room for the topic sentence
        sentences: list[str] = []
        size = 0
        while True:
            sentence = self.sentence(self.random.randint(6, 22))
            if size + len(sentence) + 1 > target:
                break
            sentences.append(sentence)
            size += len(sentence) + 1
        if topical:
            sentences.append(self.topic_sentence())
        cut = max(1, len(sentences) // 2)
        return (" ".join(sentences[:cut]) + "\n\n" + " ".join(sentences[cut:])).strip()[
            :CHUNK_CHARS
        ]

    def topic_sentence(self) -> str:
        words = self.random.sample(self.topic, min(4, len(self.topic)))
        return (" ".join(words).capitalize() + ".")[:60]


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """The function words, then distinct made-up words of one to three syllables, shorter
    first (frequent words are short ones, in every language: the longest words of a query
    are its rarer ones, which is why `core.domain.search_terms` keeps those)."""
    words = list(FUNCTION_WORDS)
    seen = set(words)
    while len(words) < size:
        syllables = rng.choice((1, 2, 2, 2, 3, 3))
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)
        )
        if word not in seen:
            seen.add(word)
            words.append(word)
    made = words[len(FUNCTION_WORDS) :]
    return words[: len(FUNCTION_WORDS)] + sorted(made, key=len)


def documents(
    corpus: Corpus, chunks: int, per_document: int, prefix: str = "bench"
) -> Iterator[tuple[NewDocument, list[Chunk]]]:
    """`chunks` passages in documents of `per_document` (the last may hold fewer), each
    document in sections of two to six passages under a two-level heading path."""
    made = 0
    number = 0
    while made < chunks:
        number += 1
        size = min(per_document, chunks - made)
        title = corpus.heading()
        document = NewDocument(
            title=f"{title} ({number})",
            source=f"{prefix}:{number}",
            role=None,
            content_hash=f"{prefix}-{number}-{size}",
        )
        part = corpus.heading()
        section = f"{part} › {corpus.heading()}"
        cut: list[Chunk] = []
        for position in range(size):
            if position and corpus.random.random() < 0.3:
                if corpus.random.random() < 0.3:
                    part = corpus.heading()
                section = f"{part} › {corpus.heading()}"
            cut.append(Chunk(position, section, None, corpus.passage()))
        made += size
        yield document, cut


def queries(corpus: Corpus, count: int) -> list[Query]:
    """`count` queries, the kinds in turn: rare words (one to three of the vocabulary's
    last two thirds), common words (two to four of its first twelve), and a consultation's
    query (a request of about 200 characters plus a reply of about 600, as
    `core.prompting.excerpts.knowledge_query` joins them)."""
    tail = corpus.words[VOCABULARY // 3 :]
    head = corpus.words[:12]
    found: list[Query] = []
    for n in range(count):
        kind = QUERY_KINDS[n % len(QUERY_KINDS)]
        if kind == "rare":
            text = " ".join(corpus.random.sample(tail, corpus.random.randint(1, 3)))
        elif kind == "common":
            text = " ".join(corpus.random.sample(head, corpus.random.randint(2, 4)))
        else:
            request = _prose(corpus, 200)
            text = request + "\n\n" + _prose(corpus, 600)
        found.append(Query(kind, text))
    return found


def _prose(corpus: Corpus, chars: int) -> str:
    sentences: list[str] = []
    while sum(len(s) + 1 for s in sentences) < chars:
        sentences.append(corpus.sentence(corpus.random.randint(6, 18)))
    return " ".join(sentences)
