"""The in-memory vector index (`storage.vector_index`): exact cosine search over float16
rows, a role as a mask, unusable rows left out, pages that outgrow the matrix."""

from __future__ import annotations

import tracemalloc

import numpy as np

from core.domain.embeddings import VECTOR_DTYPE
from storage.vector_index import IndexBuilder


def vector(*values: float) -> bytes:
    return np.asarray(values, np.float32).astype(VECTOR_DTYPE).tobytes()


def test_rows_are_ranked_by_cosine_exactly_and_ties_by_chunk_id() -> None:
    builder = IndexBuilder(2, capacity=1)  # grown as pages come
    builder.add([(10, None, vector(1, 0)), (11, None, vector(0, 1))])
    builder.add([(12, None, vector(3, 3)), (13, None, vector(2, 2)), (14, None, vector(-1, 0))])
    index = builder.finish()
    assert (len(index), index.dimensions, index.skipped) == (5, 2, 0)
    assert np.allclose(np.linalg.norm(index.matrix.astype(np.float32), axis=1), 1, atol=1e-3)
    assert index.nearest(vector(1, 0), role=None, limit=2) == [10, 12]
    assert index.nearest(vector(1, 1), role=None, limit=3) == [12, 13, 10]
    assert index.nearest(vector(1, 0), role=None, limit=50) == [10, 12, 13]  # cosine > 0


def test_a_role_reads_its_own_rows_and_the_untagged_ones() -> None:
    builder = IndexBuilder(2, capacity=3)
    builder.add([(1, "sales", vector(1, 0)), (2, None, vector(0.9, 0.1)), (3, "law", vector(1, 0))])
    index = builder.finish()
    assert index.nearest(vector(1, 0), role="sales", limit=3) == [1, 2]
    assert index.nearest(vector(1, 0), role=None, limit=3) == [2]
    assert index.nearest(vector(1, 0), role="support", limit=3) == [2]


def test_unusable_rows_are_skipped_and_a_query_of_other_dimensions_finds_nothing() -> None:
    builder = IndexBuilder(2, capacity=4)
    builder.add([
        (1, None, vector(1, 0)),
        (2, None, vector(1, 0, 0)),  # another EMBEDDING_DIMENSIONS
        (3, None, vector(0, 0)),  # zero
        (4, None, vector(float("nan"), 1)),
        (5, None, b"\x00"),
    ])  # fmt: skip
    index = builder.finish()
    assert (len(index), index.skipped) == (1, 4)
    assert index.nearest(vector(1, 0, 0), role=None, limit=3) == []
    assert index.nearest(vector(1, 0), role=None, limit=0) == []
    assert IndexBuilder(2, capacity=0).finish().nearest(vector(1, 0), role=None, limit=3) == []


def test_a_large_page_is_loaded_in_bounded_memory() -> None:
    """4,096 rows of 1,536 dimensions (12.6 MB as stored): loading them holds the 12.6 MB
    matrix and a few megabytes more, not the page converted whole (over 60 MB), and every
    row is in the index, ranked as before."""
    rng = np.random.default_rng(7)
    count, dimensions = 4096, 1536
    vectors = rng.standard_normal((count, dimensions)).astype(VECTOR_DTYPE)
    rows = [(n, None if n % 2 else "shop", vectors[n].tobytes()) for n in range(count)]
    tracemalloc.start()
    try:
        builder = IndexBuilder(dimensions, capacity=count)
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        builder.add(rows)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - base < 8_000_000
    index = builder.finish()
    assert len(index) == count
    assert index.nearest(vectors[123].tobytes(), role="shop", limit=1) == [123]
