"""OpenAIEmbedder: the real openai SDK against the fake model server's `/v1/embeddings`,
a well-behaved provider and broken ones."""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Callable

import numpy as np
import pytest

from core.domain.embeddings import VECTOR_DTYPE, EmbeddingFailed
from fakes import embeddings as fake
from fakes.model_server import FakeModelServer
from media.config import EmbeddingEndpoint
from media.embeddings import MAX_INPUT_CHARS, OpenAIEmbedder, vectors_of

Make = Callable[..., OpenAIEmbedder]


@pytest.fixture
async def make_embedder(model_server: FakeModelServer) -> AsyncIterator[Make]:
    """Embedders pointed at the fake server, closed after the test."""
    made: list[OpenAIEmbedder] = []

    def make(*, batch: int = 64, dimensions: int | None = None) -> OpenAIEmbedder:
        endpoint = EmbeddingEndpoint(
            model="embed-test",
            api_key="sk-test",
            base_url=model_server.base_url,
            dimensions=dimensions,
            batch=batch,
            timeout_seconds=10,
            max_retries=0,
        )
        made.append(OpenAIEmbedder(endpoint))
        return made[-1]

    yield make
    for embedder in made:
        await embedder.close()


def floats(vector: bytes) -> np.ndarray:
    return np.frombuffer(vector, dtype=VECTOR_DTYPE).astype(np.float32)


async def test_each_text_gets_its_unit_vector_in_order(
    make_embedder: Make, model_server: FakeModelServer
) -> None:
    """Vectors come back in the texts' order, unit length, as float16 bytes; base64 is
    what the SDK asks for."""
    texts = ["kettle warranty", "toaster returns", "kettle warranty"]
    vectors = await make_embedder().embed(texts)
    assert len(vectors) == 3
    assert {len(v) for v in vectors} == {fake.DIMENSIONS * 2}
    for vector, text in zip(vectors, texts, strict=True):
        assert np.linalg.norm(floats(vector)) == pytest.approx(1.0, abs=1e-3)
        assert floats(vector) @ np.asarray(fake.vector(text)) == pytest.approx(1.0, abs=1e-3)
    assert vectors[0] == vectors[2]
    assert model_server.embedding_requests[0]["encoding_format"] == "base64"
    assert model_server.embedding_requests[0]["model"] == "embed-test"


async def test_meaning_brings_a_query_near_its_passage(make_embedder: Make) -> None:
    """The fake's vectors carry meaning: a synonym is near, another topic is far."""
    query, warranty, toasters = await make_embedder().embed(
        ["how long is the guarantee on kettles?", "Kettles: 24 months of warranty.", "Toasters"]
    )
    assert float(floats(query) @ floats(warranty)) > 0.5
    assert abs(float(floats(query) @ floats(toasters))) < 0.3


async def test_texts_go_in_batches_each_cut_to_its_bound(
    make_embedder: Make, model_server: FakeModelServer
) -> None:
    """Five texts with a batch of two are three requests; a text of 40,000 characters is
    sent as its first MAX_INPUT_CHARS (the fake refuses longer ones, as OpenAI does)."""
    texts = ["one", "two", "three", "four", "word " * 8000]
    vectors = await make_embedder(batch=2).embed(texts)
    assert len(vectors) == 5
    assert [len(r["input"]) for r in model_server.embedding_requests] == [2, 2, 1]
    assert len(model_server.embedding_requests[2]["input"][0]) == MAX_INPUT_CHARS


async def test_dimensions_are_asked_when_configured(
    make_embedder: Make, model_server: FakeModelServer
) -> None:
    (vector,) = await make_embedder(dimensions=64).embed(["kettle"])
    assert len(vector) == 64 * 2
    assert model_server.embedding_requests[0]["dimensions"] == 64


async def test_an_outage_is_a_failure_with_its_cause(
    make_embedder: Make, model_server: FakeModelServer
) -> None:
    model_server.embedding_fault = "outage"
    with pytest.raises(EmbeddingFailed, match="HTTP 500"):
        await make_embedder().embed(["kettle"])


async def test_an_empty_text_is_refused_before_any_request(
    make_embedder: Make, model_server: FakeModelServer
) -> None:
    with pytest.raises(EmbeddingFailed, match="empty"):
        await make_embedder().embed(["kettle", "  "])
    assert model_server.embedding_requests == []


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("dimensions", "several dimension counts"),
        ("count", "2 vectors for 3 texts"),
        ("nan", "not finite"),
        ("index", "two vectors for text 0"),
    ],
)
async def test_a_wrong_answer_is_refused_whole(
    make_embedder: Make, model_server: FakeModelServer, fault: str, reason: str
) -> None:
    """A provider answering vectors of the wrong dimensions or count, NaN, or the same
    index twice gets no vector through."""
    model_server.embedding_fault = fault
    with pytest.raises(EmbeddingFailed, match=reason):
        await make_embedder().embed(["kettle", "toaster", "iron"])


async def test_an_endless_body_is_cut_at_its_bound(
    make_embedder: Make, model_server: FakeModelServer
) -> None:
    """A body that never ends is read up to the batch's bound, then refused: bounded
    time and memory."""
    model_server.embedding_fault = "huge"
    started = time.monotonic()
    with pytest.raises(EmbeddingFailed, match="an answer over"):
        await make_embedder().embed(["kettle"])
    assert time.monotonic() - started < 10


async def test_the_configured_dimensions_are_enforced(make_embedder: Make) -> None:
    """A provider that ignores `dimensions` (the fake serves what is asked, so the answer
    is checked directly) is refused."""
    body = json.dumps(fake.answer({"model": "m", "input": ["a"], "dimensions": 32}))
    with pytest.raises(EmbeddingFailed, match="EMBEDDING_DIMENSIONS is 64"):
        vectors_of(body.encode(), 1, 64)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"<html>502 Bad Gateway</html>", "not JSON"),
        (b"[]", "no vectors"),
        (b'{"data": [{"index": 0, "embedding": "not base64!"}]}', "not base64"),
        (b'{"data": [{"index": 0, "embedding": "AAA="}]}', "not float32"),
        (b'{"data": [{"index": 0, "embedding": [1, "x"]}]}', "neither base64 nor a list"),
        (b'{"data": [{"index": 0, "embedding": []}]}', "0 dimensions"),
        (b'{"data": [{"index": 0, "embedding": [0, 0]}]}', "not finite or is zero"),
        (b'{"data": [{"index": 0, "embedding": [1e400, 1]}]}', "not finite"),
        (b'{"data": [{"index": 0, "embedding": [' + b"1" + b"0" * 400 + b", 1]}]}", "not finite"),
        (b'{"data": [{"index": true, "embedding": [1, 1]}]}', "no index"),
        (b'{"data": [{"index": 3, "embedding": [1, 1]}]}', "no index"),
    ],
)
def test_malformed_answers_are_refused(body: bytes, reason: str) -> None:
    with pytest.raises(EmbeddingFailed, match=reason):
        vectors_of(body, 1, None)


def test_a_server_that_sends_lists_anyway_is_read() -> None:
    """Some local servers ignore `encoding_format=base64` and send numbers."""
    body = json.dumps(fake.answer({"model": "m", "input": ["kettle", "iron"]})).encode()
    first, second = vectors_of(body, 2, None)
    assert floats(first) @ np.asarray(fake.vector("kettle")) == pytest.approx(1.0, abs=1e-3)
    assert math.isclose(float(np.linalg.norm(floats(second))), 1.0, abs_tol=1e-3)


def test_the_fake_refuses_what_openai_refuses() -> None:
    assert fake.refusal({"model": "m", "input": []}) is not None
    assert fake.refusal({"model": "m", "input": [""]}) is not None
    assert fake.refusal({"model": "m", "input": [[1, 2]]}) is not None
    assert "maximum context length" in (fake.refusal({"model": "m", "input": "w" * 40_000}) or "")
    assert fake.refusal({"model": "m", "input": ["kettle"]}) is None
