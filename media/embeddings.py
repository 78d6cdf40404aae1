"""Texts to vectors through an OpenAI-compatible `embeddings` service.

Invariants (`core.domain.embeddings.Embedder`):
- texts go `EmbeddingEndpoint.batch` at a time, each cut to `MAX_INPUT_CHARS`, with the
  SDK's timeout and retries (429, 5xx, dropped connections) per request;
- an answer is read up to `max_body_bytes` for its batch and no further, then checked
  whole before any vector is kept: one vector per text (each `index` once), every vector
  of one dimension count (the configured one, when EMBEDDING_DIMENSIONS is set) of at
  most `MAX_DIMENSIONS`, finite and not zero; base64 (what is asked) and JSON lists of
  numbers (what some local servers send anyway) are both read;
- whatever fails (the provider's refusal, a transport error once retries are spent, a
  malformed, oversized or wrong answer) is `EmbeddingFailed` with the cause: never a
  partial answer. Vectors leave as unit-length float16 bytes.
Imported only when EMBEDDING_MODEL is set (it loads numpy).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import openai
from openai import AsyncOpenAI, omit

from core.domain.embeddings import VECTOR_DTYPE, EmbeddingFailed
from media.config import EmbeddingEndpoint

MAX_INPUT_CHARS = 8000
"""A text's longest part sent: under the 8,192 tokens OpenAI's embedding models take
(a passage is 800 characters; a query 2,000), whatever the script."""
MAX_DIMENSIONS = 8192
"""The most dimensions a vector may have; the largest models have 4,096."""
_BYTES_PER_NUMBER = 24
"""Room for one number in a JSON list (`-0.012345678901234567, `): what bounds a body."""


def max_body_bytes(texts: int) -> int:
    """The largest answer read for a batch of `texts`: every vector at `MAX_DIMENSIONS` as
    a JSON list, and room for the envelope."""
    return texts * MAX_DIMENSIONS * _BYTES_PER_NUMBER + 65_536


class OpenAIEmbedder:
    """`core.domain.embeddings.Embedder` backed by `openai.AsyncOpenAI` (one pool)."""

    def __init__(self, endpoint: EmbeddingEndpoint, *, client: AsyncOpenAI | None = None):
        self._endpoint = endpoint
        self._owns_client = client is None
        self._client = client or AsyncOpenAI(
            api_key=endpoint.api_key,
            base_url=endpoint.base_url,
            timeout=endpoint.timeout_seconds,
            max_retries=endpoint.max_retries,
        )

    @property
    def model(self) -> str:
        return self._endpoint.model

    async def embed(self, texts: Sequence[str]) -> list[bytes]:
        if any(not text.strip() for text in texts):
            raise EmbeddingFailed("an empty text has no embedding")
        vectors: list[bytes] = []
        for start in range(0, len(texts), self._endpoint.batch):
            batch = [text[:MAX_INPUT_CHARS] for text in texts[start : start + self._endpoint.batch]]
            vectors.extend(await self._request(batch))
        if len({len(vector) for vector in vectors}) > 1:
            raise EmbeddingFailed("the vectors of one request's batches differ in dimensions")
        return vectors

    async def _request(self, batch: list[str]) -> list[bytes]:
        dimensions = self._endpoint.dimensions
        try:
            async with self._client.embeddings.with_streaming_response.create(
                model=self.model,
                input=batch,
                encoding_format="base64",
                dimensions=omit if dimensions is None else dimensions,
            ) as response:
                body = bytearray()
                limit = max_body_bytes(len(batch))
                async for part in response.iter_bytes():
                    body += part
                    if len(body) > limit:
                        raise EmbeddingFailed(
                            f"an answer over {limit:,} bytes for {len(batch)} texts"
                        )
        except openai.APIStatusError as exc:
            raise EmbeddingFailed(f"HTTP {exc.status_code}: {_refusal(exc)}") from None
        except openai.APIError as exc:
            raise EmbeddingFailed(f"{type(exc).__name__}: {exc}") from None
        return vectors_of(bytes(body), len(batch), dimensions)

    async def close(self) -> None:
        """Close the connection pool if this embedder created it."""
        if self._owns_client:
            await self._client.close()


def _refusal(exc: openai.APIStatusError) -> str:
    """The provider's own words: its error body's message, else the SDK's summary."""
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    return message[:500] if isinstance(message, str) and message else exc.message[:500]


def vectors_of(body: bytes, count: int, dimensions: int | None) -> list[bytes]:
    """The `count` vectors of an embeddings answer, in input order, as unit-length float16
    bytes; `EmbeddingFailed` for anything else (see the module)."""
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        raise EmbeddingFailed("the answer is not JSON") from None
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or len(data) != count:
        got = len(data) if isinstance(data, list) else "no"
        raise EmbeddingFailed(f"{got} vectors for {count} texts")
    found: dict[int, npt.NDArray[np.float32]] = {}
    for position, item in enumerate(data):
        index = item.get("index", position) if isinstance(item, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
            raise EmbeddingFailed(f"item {position} has no index among the {count} texts")
        if index in found:
            raise EmbeddingFailed(f"two vectors for text {index}")
        found[index] = _numbers(item.get("embedding"), index)
    sizes = {len(vector) for vector in found.values()}
    if len(sizes) != 1:
        raise EmbeddingFailed(f"vectors of several dimension counts: {sorted(sizes)[:4]}")
    (size,) = sizes
    if dimensions is not None and size != dimensions:
        raise EmbeddingFailed(f"vectors of {size} dimensions, EMBEDDING_DIMENSIONS is {dimensions}")
    return [_unit_float16(found[index], index) for index in range(count)]


def _numbers(embedding: Any, index: int) -> npt.NDArray[np.float32]:
    if isinstance(embedding, str):
        try:
            raw = base64.b64decode(embedding, validate=True)
        except (binascii.Error, ValueError):
            raise EmbeddingFailed(f"vector {index} is not base64") from None
        if len(raw) % 4:
            raise EmbeddingFailed(f"vector {index} is not float32 numbers")
        vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    elif isinstance(embedding, list) and all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in embedding
    ):
        try:
            vector = np.asarray(embedding, dtype=np.float64).astype(np.float32)
        except OverflowError:  # an integer past any float
            raise EmbeddingFailed(f"vector {index} is not finite") from None
    else:
        raise EmbeddingFailed(f"vector {index} is neither base64 nor a list of numbers")
    if not 0 < len(vector) <= MAX_DIMENSIONS:
        raise EmbeddingFailed(f"vector {index} has {len(vector)} dimensions")
    return vector


def _unit_float16(vector: npt.NDArray[np.float32], index: int) -> bytes:
    with np.errstate(over="ignore", invalid="ignore"):
        norm = float(np.linalg.norm(vector.astype(np.float64)))
    if not np.isfinite(vector).all() or not norm > 0:
        raise EmbeddingFailed(f"vector {index} is not finite or is zero")
    return (vector.astype(np.float64) / norm).astype(VECTOR_DTYPE).tobytes()
