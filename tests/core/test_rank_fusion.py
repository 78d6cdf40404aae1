"""Reciprocal rank fusion of the text and vector rankings (`core.domain.rank_fusion`)."""

from __future__ import annotations

import pytest

from core.domain.rank_fusion import RRF_K, fuse


def test_a_passage_both_rankings_hold_outranks_one_ranked_first_by_one() -> None:
    """7 is second in both: 2/62 beats 1/61 for either ranking's first alone."""
    fused = fuse([1, 7, 3], [2, 7, 4], limit=10)
    assert [chunk_id for chunk_id, _ in fused] == [7, 1, 2, 3, 4]
    assert fused[0][1] == pytest.approx(2 / (RRF_K + 2))
    assert fused[1][1] == pytest.approx(1 / (RRF_K + 1))


def test_equal_scores_keep_the_text_ranking_first_then_the_vector_rankings() -> None:
    fused = fuse([5, 6], [8, 9], limit=4)
    assert [chunk_id for chunk_id, _ in fused] == [5, 8, 6, 9]


def test_one_empty_ranking_leaves_the_other_in_its_order() -> None:
    assert [c for c, _ in fuse([], [3, 1, 2], limit=5)] == [3, 1, 2]
    assert [c for c, _ in fuse([3, 1, 2], [], limit=5)] == [3, 1, 2]
    assert fuse([], [], limit=5) == []


def test_the_limit_cuts_the_fused_ranking_and_a_repeated_id_counts_once() -> None:
    fused = fuse([1, 1, 2], [2], limit=1)
    assert fused == [(2, pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1)))]
    assert fuse([1, 2], [3], limit=0) == []


def test_k_flattens_the_first_places() -> None:
    """With a small k, being first in one ranking beats being second in both."""
    assert [c for c, _ in fuse([1, 7], [2, 7], limit=1, k=0)] == [1]
    assert [c for c, _ in fuse([1, 7], [2, 7], limit=1)] == [7]
