"""The knowledge base a process reads and loads: the store's, made hybrid when
EMBEDDING_MODEL is set.

Invariant: without EMBEDDING_MODEL this module returns the store's own knowledge base and
imports nothing more (numpy, the embeddings client and the vector index load only with
it); with it, search is hybrid (`storage.hybrid`) and `embedder` embeds what is loaded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.settings import Settings
from core.domain.embeddings import Embedder
from core.domain.knowledge import KnowledgeBase

if TYPE_CHECKING:  # a type only (app.stores defines it for type checkers alone)
    from app.stores import Store


async def _nothing_to_close() -> None:
    """Without embeddings the knowledge base is the store's, closed with it."""


@dataclass(frozen=True, slots=True)
class OpenedKnowledge:
    """The knowledge base and the embedder its loader uses (None: no embeddings)."""

    knowledge: KnowledgeBase
    embedder: Embedder | None = None
    close: Callable[[], Awaitable[None]] = _nothing_to_close
    """Closes the embedder's connection pool."""


def open_knowledge(settings: Settings, store: Store) -> OpenedKnowledge:
    """The store's knowledge base, hybrid when an embeddings model is configured."""
    endpoint = settings.embedding_endpoint()
    if endpoint is None:
        return OpenedKnowledge(store.knowledge)
    from media.embeddings import OpenAIEmbedder  # numpy and the SDK's embeddings: only now
    from storage.hybrid import HybridKnowledge

    embedder = OpenAIEmbedder(endpoint)
    hybrid = HybridKnowledge(
        store.knowledge,
        embedder,
        query_seconds=endpoint.query_seconds,
    )
    return OpenedKnowledge(hybrid, embedder, embedder.close)
