"""Knowledge-base vectors on SQLite and PostgreSQL (`tests.store_contract.STORE_KINDS`) and
hybrid retrieval over them (`storage.hybrid`), with the real openai SDK against the fake
model server's embeddings: vectors are written, replaced and removed with their chunks;
hybrid search finds by meaning what full text cannot, keeps to a consultation's role,
sees this process's changes at once and another's within the check interval, and answers
by full text when the embeddings provider fails or is slow."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import numpy as np
import pytest

from core.domain.embeddings import VECTOR_DTYPE, Embedded
from core.domain.knowledge import Chunk, NewDocument, Stored
from fakes import embeddings as fake
from fakes.model_server import FakeModelServer
from media.config import EmbeddingEndpoint
from media.embeddings import OpenAIEmbedder
from storage.hybrid import CHECK_SECONDS, HybridKnowledge
from tests.store_contract import Rows, StoreKind

if TYPE_CHECKING:
    from app.stores import Store

MODEL = "embed-test"
KETTLES = "Electric kettles are covered by the warranty for 24 months after purchase."
TOASTERS = "Toasters may be returned within 14 days when unused."
DELIVERY = "Parcels are delivered within three working days."
SYNONYM_QUERY = "guarantee"
"""No passage holds the word; the fake's model knows it means "warranty"."""


def vector(text: str) -> bytes:
    return np.asarray(fake.vector(text), np.float32).astype(VECTOR_DTYPE).tobytes()


def chunks(*texts: str) -> list[Chunk]:
    return [Chunk(n, "", None, text) for n, text in enumerate(texts)]


def embedded(*texts: str, model: str = MODEL) -> Embedded:
    return Embedded(model, [vector(text) for text in texts])


def document(source: str, content: str = "v1", role: str | None = None) -> NewDocument:
    return NewDocument(source, source, role, f"hash-{content}")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def embedder(model_server: FakeModelServer) -> AsyncIterator[OpenAIEmbedder]:
    endpoint = EmbeddingEndpoint(
        model=MODEL, api_key="sk-test", base_url=model_server.base_url, max_retries=0
    )
    made = OpenAIEmbedder(endpoint)
    yield made
    await made.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def hybrid(store: Store, embedder: OpenAIEmbedder, clock: Clock) -> HybridKnowledge:
    return HybridKnowledge(store.knowledge, embedder, query_seconds=1.0, clock=clock)


async def put(
    knowledge: Store | HybridKnowledge,
    source: str,
    *texts: str,
    role: str | None = None,
    vectors: bool = True,
) -> int:
    target = knowledge.knowledge if not isinstance(knowledge, HybridKnowledge) else knowledge
    stored, _ = await target.put(
        document(source, "|".join(texts), role),
        chunks(*texts),
        at=1.0,
        vectors=embedded(*texts) if vectors else None,
    )
    return stored.id


# -- stored with their chunks ---------------------------------------------------------------


async def test_vectors_are_written_with_their_chunks(store: Store, rows: Rows) -> None:
    await put(store, "/a.md", KETTLES, TOASTERS)
    assert await rows("knowledge_vectors", model=MODEL) == 2
    assert await store.knowledge.vector_version(MODEL) == (2, await highest_chunk(store))
    page = await store.knowledge.vectors(MODEL, after=0, limit=10)
    assert [(role, blob) for _, role, blob in page] == [
        (None, vector(KETTLES)),
        (None, vector(TOASTERS)),
    ]
    assert await store.knowledge.vectors("another-model", after=0, limit=10) == []


async def highest_chunk(store: Store) -> int:
    found = await store.knowledge.search("kettles toasters", role=None, limit=10)
    assert found is not None
    return max(p.chunk_id for p in found)


async def test_vectors_are_replaced_and_removed_with_their_chunks(store: Store, rows: Rows) -> None:
    """A replaced document's vectors are its new chunks' (or none, put without); a removed
    document leaves no vector."""
    document_id = await put(store, "/a.md", KETTLES, TOASTERS)
    await put(store, "/a.md", DELIVERY)
    assert await rows("knowledge_vectors") == 1
    page = await store.knowledge.vectors(MODEL, after=0, limit=10)
    assert [blob for _, _, blob in page] == [vector(DELIVERY)]
    await put(store, "/a.md", KETTLES, vectors=False)
    assert await rows("knowledge_vectors") == 0
    await put(store, "/a.md", TOASTERS)
    assert await store.knowledge.remove([document_id]) == [document_id]
    assert await rows("knowledge_vectors") == 0


async def test_a_vector_count_that_is_not_the_chunks_stores_nothing(
    store: Store, rows: Rows
) -> None:
    with pytest.raises(ValueError, match="1 vectors for 2 chunks"):
        await store.knowledge.put(
            document("/a.md"), chunks(KETTLES, TOASTERS), at=1.0, vectors=embedded(KETTLES)
        )
    assert await rows("knowledge_chunks") == 0
    assert await rows("knowledge_documents") == 0


async def test_vectors_are_read_in_pages_with_their_roles(store: Store) -> None:
    await put(store, "/a.md", KETTLES, role="support")
    await put(store, "/b.md", TOASTERS, DELIVERY)
    first = await store.knowledge.vectors(MODEL, after=0, limit=2)
    rest = await store.knowledge.vectors(MODEL, after=first[-1][0], limit=2)
    assert [role for _, role, _ in first + rest] == ["support", None, None]
    ids = [chunk_id for chunk_id, _, _ in first + rest]
    assert ids == sorted(ids) and len(set(ids)) == 3
    passages = await store.knowledge.passages([ids[2], ids[0], 10**9])
    assert sorted(p.text for p in passages) == sorted([KETTLES, DELIVERY])


# -- hybrid search --------------------------------------------------------------------------


async def test_hybrid_search_finds_by_meaning_what_full_text_misses(
    store: Store, hybrid: HybridKnowledge, model_server: FakeModelServer
) -> None:
    await put(store, "/a.md", KETTLES, TOASTERS, DELIVERY)
    assert await store.knowledge.search(SYNONYM_QUERY, role=None, limit=3) == []
    found = await hybrid.search(SYNONYM_QUERY, role=None, limit=1)
    assert found is not None
    assert [p.text for p in found] == [KETTLES]
    assert found[0].score == pytest.approx(1 / 61)
    assert [r["input"] for r in model_server.embedding_requests] == [[SYNONYM_QUERY]]


async def test_a_passage_both_rankings_hold_comes_first(
    store: Store, hybrid: HybridKnowledge
) -> None:
    """ "kettles guarantee": full text finds the kettle passage by "kettles", meaning by
    both words; fused, it leads with the sum of both reciprocal ranks."""
    await put(store, "/a.md", TOASTERS, DELIVERY, KETTLES)
    found = await hybrid.search("kettles guarantee", role=None, limit=3)
    assert found is not None
    assert found[0].text == KETTLES
    assert found[0].score == pytest.approx(2 / 61)


async def test_hybrid_search_keeps_to_the_role(store: Store, hybrid: HybridKnowledge) -> None:
    await put(store, "/sales.md", KETTLES, role="sales")
    await put(store, "/all.md", DELIVERY)
    for_support = await hybrid.search(SYNONYM_QUERY, role="support", limit=3)
    for_sales = await hybrid.search(SYNONYM_QUERY, role="sales", limit=3)
    assert for_support is not None and for_sales is not None
    assert KETTLES not in [p.text for p in for_support]
    assert for_sales[0].text == KETTLES


async def test_chunks_without_vectors_are_found_by_their_words(
    store: Store, hybrid: HybridKnowledge
) -> None:
    """A document loaded before embeddings were configured is still found by full text."""
    await put(store, "/old.md", KETTLES, vectors=False)
    await put(store, "/new.md", DELIVERY)
    found = await hybrid.search("kettles", role=None, limit=3)
    assert found is not None
    assert found[0].text == KETTLES


async def test_an_empty_knowledge_base_costs_no_embedding(
    hybrid: HybridKnowledge, model_server: FakeModelServer
) -> None:
    assert await hybrid.search("kettles", role=None, limit=3) is None
    assert await hybrid.search("toasters", role=None, limit=3) is None
    assert model_server.embedding_requests == []


async def test_this_process_changes_are_searched_at_once(
    store: Store, hybrid: HybridKnowledge
) -> None:
    await put(hybrid, "/a.md", DELIVERY)
    assert await hybrid.search(SYNONYM_QUERY, role=None, limit=1) is not None
    await put(hybrid, "/b.md", KETTLES)  # no time passes
    found = await hybrid.search(SYNONYM_QUERY, role=None, limit=1)
    assert found is not None and found[0].text == KETTLES
    assert hybrid.loads == 2


async def test_another_process_addition_is_seen_within_the_check_interval(
    kind: StoreKind, database: str, store: Store, hybrid: HybridKnowledge, clock: Clock
) -> None:
    await put(store, "/a.md", DELIVERY)
    await hybrid.search(SYNONYM_QUERY, role=None, limit=1)
    other = await kind.open(database)
    try:
        await put(other, "/b.md", KETTLES)
    finally:
        await other.close()
    clock.now += CHECK_SECONDS / 2
    stale = await hybrid.search(SYNONYM_QUERY, role=None, limit=1)
    assert stale == []  # the index loaded before, not checked again yet
    clock.now += CHECK_SECONDS
    found = await hybrid.search(SYNONYM_QUERY, role=None, limit=1)
    assert found is not None and found[0].text == KETTLES
    assert hybrid.loads == 2
    clock.now += CHECK_SECONDS * 2
    await hybrid.search(SYNONYM_QUERY, role=None, limit=1)
    assert hybrid.loads == 2  # the version check found nothing new: no load


async def test_an_embeddings_outage_at_search_answers_by_full_text(
    store: Store,
    hybrid: HybridKnowledge,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await put(store, "/a.md", KETTLES, TOASTERS)
    model_server.embedding_fault = "outage"
    with caplog.at_level(logging.WARNING, logger="storage.hybrid"):
        found = await hybrid.search("toasters guarantee", role=None, limit=3)
    assert found is not None
    assert [p.text for p in found] == [TOASTERS]
    warnings = [r.getMessage() for r in caplog.records if r.name == "storage.hybrid"]
    assert len(warnings) == 1 and "HTTP 500" in warnings[0]


async def test_a_slow_provider_at_search_answers_by_full_text_in_time(
    store: Store, hybrid: HybridKnowledge, model_server: FakeModelServer
) -> None:
    await put(store, "/a.md", KETTLES, TOASTERS)
    model_server.embedding_fault = "slow"
    found = await hybrid.search("toasters", role=None, limit=3)
    assert found is not None and [p.text for p in found] == [TOASTERS]


async def test_vectors_of_other_dimensions_are_left_out(
    store: Store, hybrid: HybridKnowledge, kind: StoreKind, database: str
) -> None:
    """Vectors stored at other dimensions (another EMBEDDING_DIMENSIONS) are skipped: those
    chunks are ranked by their words."""
    await put(store, "/a.md", DELIVERY)
    short = Embedded(MODEL, [vector(KETTLES)[:64]])
    _, outcome = await store.knowledge.put(
        document("/b.md"), chunks(KETTLES), at=1.0, vectors=short
    )
    assert outcome is Stored.ADDED
    found = await hybrid.search(SYNONYM_QUERY, role=None, limit=2)
    assert found is not None and KETTLES not in [p.text for p in found]
    found = await hybrid.search("kettles", role=None, limit=2)
    assert found is not None and found[0].text == KETTLES
