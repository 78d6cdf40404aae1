"""A consultation reading a hybrid knowledge base, end to end on both stores: the real
engine, the store's knowledge base made hybrid (`storage.hybrid`), the real openai SDK
for the chat and the embeddings, the fake model server for both. The passage the vector
side finds, which full text cannot, reaches the model's request; the query embedded is
the turn's knowledge query, once per turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

from core.domain.asking import UserMessage
from core.domain.embeddings import Embedded
from core.domain.knowledge import Chunk, NewDocument
from core.llm.llm import OpenAICompleter
from fakes.model_server import FakeModelServer
from media.config import EmbeddingEndpoint
from media.embeddings import OpenAIEmbedder
from media.knowledge_files import embedding_text
from storage.hybrid import HybridKnowledge
from tests.service_harness import Clock, make_service
from tests.store_contract import StoreKind

if TYPE_CHECKING:
    from app.stores import Store

REQUEST = "My teapot stopped heating. Is there a guarantee?"
KETTLES = "Electric kettles are covered by the warranty for 24 months after purchase."
OTHERS = (
    "Parcels are delivered within three working days.",
    "Toasters may be returned within 14 days when unused.",
)


@pytest.fixture
async def opened(kind: StoreKind, database: str) -> AsyncIterator[Store]:
    store = await kind.open(database)
    yield store
    await store.close()


@pytest.fixture
async def embedder(model_server: FakeModelServer) -> AsyncIterator[OpenAIEmbedder]:
    endpoint = EmbeddingEndpoint(
        model="embed-test", api_key="sk-test", base_url=model_server.base_url, max_retries=0
    )
    made = OpenAIEmbedder(endpoint)
    yield made
    await made.close()


async def test_the_passage_found_by_meaning_reaches_the_models_request(
    opened: Store,
    embedder: OpenAIEmbedder,
    completer: OpenAICompleter,
    model_server: FakeModelServer,
) -> None:
    texts = (*OTHERS, KETTLES)
    chunks = [Chunk(n, "Terms", None, text) for n, text in enumerate(texts)]
    vectors = await embedder.embed([embedding_text(chunk) for chunk in chunks])
    await opened.knowledge.put(
        NewDocument("Shop terms", "/terms.md", None, "h"),
        chunks,
        at=1.0,
        vectors=Embedded(embedder.model, vectors),
    )
    assert await opened.knowledge.search(REQUEST, role=None, limit=6) == []  # words alone
    model_server.embedding_requests.clear()

    hybrid = HybridKnowledge(opened.knowledge, embedder)
    engine = make_service(opened, completer, Clock(), knowledge=hybrid, default_max_rounds=2)
    model_server.enqueue("Which model is it?")
    await engine.turns.ask(UserMessage("tg:1", REQUEST, turn_id="tg:1:1"))

    system = model_server.requests[-1]["messages"][0]["content"]
    assert "[K1] Shop terms › Terms" in system
    assert f"> {KETTLES}" in system
    assert [r["input"] for r in model_server.embedding_requests] == [[REQUEST]]
