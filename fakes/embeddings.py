"""The fake model server's embeddings: `POST /v1/embeddings` as OpenAI answers it, with
vectors that carry enough meaning for tests.

Invariants:
- a text's vector is a hashed bag of its word stems (`stem`: lower case, a plural's or
  a verb form's ending cut, `SYNONYMS` mapped onto one word, `STOP_WORDS` left out) over
  `DIMENSIONS` (or the `dimensions` asked), each stem adding ±1 at a place its BLAKE2
  hash picks: the same text always gets the same vector, texts sharing stems are near,
  and "guarantee" is near "warranty" though no full-text search finds one by the other;
- answers have OpenAI's shape (`object: list`, `data[i]` with `embedding` and `index`,
  `model`, `usage`), the numbers as base64 float32 when `encoding_format=base64` is asked
  (the openai SDK asks it by default), else as JSON lists;
- like OpenAI, it answers 400 to an empty list, an empty text, input that is not text,
  and a text over `MAX_INPUT_TOKENS` (counted as a quarter of its characters);
- `FAULTS` reproduce broken providers for hostile tests.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import struct
from typing import Any

DIMENSIONS = 256
MAX_INPUT_TOKENS = 8192
SYNONYMS = {"guarantee": "warranty", "teapot": "kettle"}
"""Words the fake's model knows to mean another: a test's vector side finds by these what
full text cannot."""
STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "do", "for", "from", "how", "i", "in",
    "is", "it", "its", "my", "of", "on", "or", "our", "the", "this", "to", "what", "when",
    "where", "which", "who", "why", "will", "with", "you", "your",
})  # fmt: skip
FAULTS = frozenset({"outage", "dimensions", "count", "nan", "huge", "index", "slow"})
"""`outage`: 500 to every request; `dimensions`: one vector shorter than the others;
`count`: one vector fewer than texts; `nan`: a NaN in the first vector; `huge`: a body
that never ends; `index`: every item's index 0; `slow`: no answer until the server stops."""

_WORD = re.compile(r"\w+")


def stem(word: str) -> str:
    word = SYNONYMS.get(word.lower(), word.lower())
    for ending, keep in (("ies", "y"), ("s", ""), ("ing", ""), ("ed", "")):
        if word.endswith(ending) and len(word) - len(ending) >= 3 and not word.endswith("ss"):
            word = word[: -len(ending)] + keep
            break
    return SYNONYMS.get(word, word)


def vector(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """The text's vector (see the module), unit length; a text of stop words alone gets
    the first axis."""
    values = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        if word in STOP_WORDS:
            continue
        digest = hashlib.blake2b(stem(word).encode(), digest_size=8).digest()
        place = int.from_bytes(digest[:4], "little") % dimensions
        values[place] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in values))
    if norm == 0:
        values[0], norm = 1.0, 1.0
    return [v / norm for v in values]


def tokens(text: str) -> int:
    return max(1, len(text) // 4)


def refusal(body: Any) -> str | None:
    """What OpenAI says to a request it refuses (400), or None."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return "you must provide a model parameter"
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts:
        return "'$.input' is invalid. Please check the API reference"
    for text in texts:
        if not isinstance(text, str) or not text:
            return "'$.input' is invalid. Please check the API reference"
        if tokens(text) > MAX_INPUT_TOKENS:
            return (
                f"This model's maximum context length is {MAX_INPUT_TOKENS} tokens, however"
                f" you requested {tokens(text)} tokens. Please reduce your prompt."
            )
    dimensions = body.get("dimensions", DIMENSIONS)
    if not isinstance(dimensions, int) or not 1 <= dimensions <= 3072:
        return "Invalid value for 'dimensions'"
    return None


def answer(body: dict[str, Any], fault: str | None = None) -> dict[str, Any]:
    """The answer to a request `refusal` let through, broken as `fault` says."""
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    dimensions = int(body.get("dimensions", DIMENSIONS))
    vectors = [vector(text, dimensions) for text in texts]
    if fault == "dimensions":
        vectors[-1] = vectors[-1][:-1]
    if fault == "nan":
        vectors[0][0] = math.nan
    if fault == "count":
        vectors = vectors[:-1]
    as_base64 = body.get("encoding_format") == "base64"
    data = [
        {
            "object": "embedding",
            "index": 0 if fault == "index" else i,
            "embedding": _base64(numbers) if as_base64 else numbers,
        }
        for i, numbers in enumerate(vectors)
    ]
    used = sum(tokens(text) for text in texts)
    return {
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": used, "total_tokens": used},
    }


def _base64(numbers: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(numbers)}f", *numbers)).decode()
