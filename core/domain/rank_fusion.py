"""Two rankings of the knowledge base's passages made one: reciprocal rank fusion.

Invariants:
- a passage's fused score is the sum over the rankings holding it of 1 / (k + rank),
  rank counted from 1: a passage both rankings hold outranks one that only one of them
  ranks as high, and neither ranking's own scores (bm25, cosine) matter, only its order;
- ties are broken by the text ranking's order, then the vector ranking's: the answer
  is the same for the same rankings;
- each id appears once in the answer; a ranking holding an id twice counts its first
  place only, and the ids after it keep their places as if it were there once.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60
"""The constant of Cormack, Clarke and Büttcher (2009), which most hybrid searches keep:
it flattens the difference between the first few places of one ranking."""


def fuse(
    text: Sequence[int], vector: Sequence[int], *, limit: int, k: int = RRF_K
) -> list[tuple[int, float]]:
    """The ids of `text` and `vector` (each best first) by fused score, best first, at
    most `limit`, each with its score."""
    scores: dict[int, float] = {}
    order: dict[int, tuple[int, int]] = {}
    for which, ranking in enumerate((text, vector)):
        ranked = list(dict.fromkeys(ranking))  # a repeated id keeps its first place only
        for rank, chunk_id in enumerate(ranked, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (k + rank)
            order.setdefault(chunk_id, (which, rank))
    best = sorted(scores, key=lambda chunk_id: (-scores[chunk_id], order[chunk_id]))
    return [(chunk_id, scores[chunk_id]) for chunk_id in best[: max(limit, 0)]]
