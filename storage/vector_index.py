"""The knowledge base's vectors of one model as a matrix in memory, searched exactly.

Invariants:
- the matrix holds one float16 row of unit length per chunk, with its chunk id and its
  document's role beside it; rows of other dimensions than the query's (another
  EMBEDDING_DIMENSIONS) and rows not finite or zero are left out, counted in `skipped`;
- `nearest` ranks every row the role may read (its own documents' and the untagged ones')
  by cosine with the query, exactly (no approximate index), best first, ties by chunk
  id: the same index and query give the same answer; a row of cosine 0 or less is not
  near, and never returned;
- building and searching run on a worker thread (`asyncio.to_thread`): numpy releases
  the GIL in its loops, and the event loop never waits on 100,000 rows.
Imported only when an embeddings model is configured: numpy is loaded by nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.domain.embeddings import VECTOR_DTYPE, VECTOR_ITEM_BYTES
from storage.knowledge import VectorRow

EVERY_ROLE = 0
"""The role code of an untagged document's rows: every role reads them."""
_BLOCK_ROWS = 256
"""Rows converted to float32 at once while searching: a buffer the CPU cache holds."""


@dataclass(frozen=True, slots=True)
class VectorIndex:
    """One model's vectors of one dimension count (see the module)."""

    ids: npt.NDArray[np.int64]
    roles: npt.NDArray[np.int32]
    role_codes: dict[str, int]
    matrix: npt.NDArray[np.float16]
    skipped: int = 0

    @property
    def dimensions(self) -> int:
        return int(self.matrix.shape[1])

    def __len__(self) -> int:
        return len(self.ids)

    def nearest(self, query: bytes, *, role: str | None, limit: int) -> list[int]:
        """The chunk ids of the `limit` rows `role` may read most like `query` (vector
        bytes of `dimensions`), best first; none when the query has other dimensions."""
        if not len(self.ids) or limit <= 0 or len(query) != self.dimensions * VECTOR_ITEM_BYTES:
            return []
        vector = np.frombuffer(query, dtype=VECTOR_DTYPE).astype(np.float32)
        scores = _cosines(self.matrix, vector)
        readable = self.roles == EVERY_ROLE
        code = self.role_codes.get(role) if role is not None else None
        if code is not None:
            readable |= self.roles == code
        readable &= scores > 0  # unrelated (or opposite) in meaning: never "near"
        scores[~readable] = -np.inf
        count = min(limit, int(readable.sum()))
        if count == 0:
            return []
        # Every row scoring at least the count-th best, so that a tie at the boundary is
        # broken by chunk id too; then best first, equal scores by chunk id (lexsort's
        # last key is the primary one).
        kth = np.partition(scores, len(scores) - count)[len(scores) - count]
        top = np.flatnonzero(scores >= kth)
        ordered = top[np.lexsort((self.ids[top], -scores[top]))][:count]
        return [int(chunk_id) for chunk_id in self.ids[ordered]]


def _cosines(
    matrix: npt.NDArray[np.float16], vector: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """`matrix @ vector` in float32, `_BLOCK_ROWS` rows at a time through one small buffer:
    numpy multiplies float16 without BLAS, nearly three times slower than converting a
    block that stays in the cache and multiplying it in float32 (measured, 100,000 rows
    of 1,536 dimensions: 1.15 s against 0.43 s)."""
    scores = np.empty(len(matrix), np.float32)
    buffer = np.empty((min(_BLOCK_ROWS, len(matrix)), matrix.shape[1]), np.float32)
    for start in range(0, len(matrix), _BLOCK_ROWS):
        block = matrix[start : start + _BLOCK_ROWS]
        rows = buffer[: len(block)]
        np.copyto(rows, block)
        np.matmul(rows, vector, out=scores[start : start + len(block)])
    return scores


class IndexBuilder:
    """Builds a `VectorIndex` of `dimensions` from pages of stored rows, the matrix
    allocated once for `capacity` rows (grown by half when more come): loading never holds
    the rows' bytes and a second matrix at once, nor a page converted whole."""

    def __init__(self, dimensions: int, capacity: int) -> None:
        self._dimensions = dimensions
        self._matrix = np.empty((max(capacity, 1), dimensions), np.float16)
        self._ids: list[int] = []
        self._roles: list[int] = []
        self._codes: dict[str, int] = {}
        self._skipped = 0

    def add(self, rows: Sequence[VectorRow]) -> None:
        """Add a page of rows (chunk id, role, vector bytes); rows of other dimensions,
        not finite or zero are skipped. The page is converted `_BLOCK_ROWS` rows at a
        time, so what loading holds besides the matrix and the page's own bytes stays a
        few megabytes however large the page (a whole page in float32, joined, masked and
        scaled, was four copies of it: 100 MB for 4,096 rows of 1,536 dimensions)."""
        size = self._dimensions * VECTOR_ITEM_BYTES
        fitting = [row for row in rows if len(row[2]) == size]
        self._skipped += len(rows) - len(fitting)
        for begin in range(0, len(fitting), _BLOCK_ROWS):
            self._add_block(fitting[begin : begin + _BLOCK_ROWS])

    def _add_block(self, fitting: Sequence[VectorRow]) -> None:
        page = np.frombuffer(b"".join(row[2] for row in fitting), dtype=VECTOR_DTYPE)
        block = page.reshape(len(fitting), self._dimensions).astype(np.float32)
        norms = np.linalg.norm(block, axis=1)
        good = np.isfinite(norms) & (norms > 0)
        self._skipped += len(fitting) - int(good.sum())
        block = block[good] / norms[good, None]
        start = len(self._ids)
        if start + len(block) > len(self._matrix):
            grown = max(start + len(block), len(self._matrix) * 3 // 2)
            self._matrix = np.concatenate(
                (self._matrix[:start], np.empty((grown - start, self._dimensions), np.float16))
            )
        self._matrix[start : start + len(block)] = block
        for (chunk_id, role, _), keep in zip(fitting, good.tolist(), strict=True):
            if keep:
                self._ids.append(chunk_id)
                code = (
                    EVERY_ROLE
                    if role is None
                    else self._codes.setdefault(role, len(self._codes) + 1)
                )
                self._roles.append(code)

    def finish(self) -> VectorIndex:
        count = len(self._ids)
        return VectorIndex(
            np.asarray(self._ids, np.int64),
            np.asarray(self._roles, np.int32),
            dict(self._codes),
            self._matrix[:count],
            self._skipped,
        )
