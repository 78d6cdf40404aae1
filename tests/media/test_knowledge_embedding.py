"""The knowledge loader with an embedder (the real openai SDK against the fake model
server's embeddings) on a real SQLite knowledge base: every passage is embedded before
anything is stored, and a document the provider fails is refused whole, its old version
kept, while the documents after it are loaded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.domain.knowledge import Stored
from fakes.model_server import FakeModelServer
from media.config import EmbeddingEndpoint, ReaderConfig
from media.embeddings import OpenAIEmbedder
from media.knowledge_files import KnowledgeLoader
from media.reader_pool import DocumentReaders
from storage.sqlite.store import SqliteStore
from tests.store_contract import count

PRICES = b"# Prices\n\n## Kettles\n\nThe Aqua kettle costs 49 euros.\n"
RETURNS = b"# Returns\n\nGoods may be returned within 30 days.\n"


@pytest.fixture
async def loader(
    store: SqliteStore, model_server: FakeModelServer
) -> AsyncIterator[KnowledgeLoader]:
    endpoint = EmbeddingEndpoint(
        model="embed-test", api_key="sk-test", base_url=model_server.base_url, max_retries=0
    )
    embedder = OpenAIEmbedder(endpoint)
    async with DocumentReaders(ReaderConfig(processes=1)) as readers:
        yield KnowledgeLoader(store.knowledge, readers, max_bytes=10_000, embedder=embedder)
    await embedder.close()


async def test_a_failed_embedding_refuses_that_document_and_the_rest_go_on(
    store: SqliteStore, loader: KnowledgeLoader, model_server: FakeModelServer, db_path: Path
) -> None:
    first = await loader.load_upload(PRICES, name="prices.md")
    assert first.stored is Stored.ADDED
    model_server.embedding_fault = "nan"
    changed = await loader.load_upload(PRICES.replace(b"49", b"55"), name="prices.md")
    refused = await loader.load_upload(RETURNS, name="returns.md")
    model_server.embedding_fault = None
    after = await loader.load_upload(RETURNS, name="returns.md")
    assert changed.problem == "not embedded (vector 0 is not finite or is zero); nothing stored"
    assert refused.problem.startswith("not embedded")
    assert after.stored is Stored.ADDED
    found = await store.knowledge.search("kettle", role=None, limit=3)
    assert found is not None and "49 euros" in found[0].text  # the old version, whole
    assert [d.source for d in await store.knowledge.documents()] == [
        "upload:prices.md",
        "upload:returns.md",
    ]
    chunks = await count(db_path, "SELECT COUNT(*) FROM knowledge_chunks")
    assert await count(db_path, "SELECT COUNT(*) FROM knowledge_vectors") == chunks == 2
