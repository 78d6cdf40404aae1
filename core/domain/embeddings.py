"""Text turned into vectors: the port the knowledge base embeds its passages and a turn's
query through, and the vectors it stores.

Invariants:
- a vector is `VECTOR_DTYPE` bytes (float16, little-endian) of unit length, every vector
  of one `Embedder.embed` answer of one length (its dimensions), in the order of the
  texts asked: the cosine of two vectors is their dot product;
- `Embedder.embed` answers one vector per text or raises `EmbeddingFailed` with a reason
  an operator can act on (the provider's refusal, a malformed or oversized answer, a
  vector that is not finite): never a partial answer;
- a chunk's vector is stored with the model that made it (`Embedded`): vectors of two
  models are never compared.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

VECTOR_DTYPE = "<f2"
"""How a vector's bytes are read (numpy's name): float16, little-endian, two bytes a
dimension."""
VECTOR_ITEM_BYTES = 2


class EmbeddingFailed(Exception):
    """The embeddings provider gave no usable answer; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Embedder(Protocol):
    @property
    def model(self) -> str:
        """The model whose vectors `embed` answers (stored beside each vector)."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[bytes]:
        """One vector per text, in order (see the module); `EmbeddingFailed` otherwise."""
        ...


@dataclass(frozen=True, slots=True)
class Embedded:
    """The vectors of a document's chunks, one per chunk in the chunks' order, and the
    model that made them."""

    model: str
    vectors: Sequence[bytes]

    def __post_init__(self) -> None:
        lengths = {len(vector) for vector in self.vectors}
        if len(lengths) > 1 or any(n == 0 or n % VECTOR_ITEM_BYTES for n in lengths):
            raise ValueError("vectors of one document are non-empty and of one length")
