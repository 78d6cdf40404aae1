"""`consultation-bot knowledge` with EMBEDDING_MODEL, on both stores, against the fake
model server's embeddings: `add` stores each passage's vector, `search` finds by meaning
what full text cannot, an embeddings outage refuses the documents (nothing stored, exit
1), and `reindex` embeds documents added before embeddings were configured."""

from __future__ import annotations

from pathlib import Path

from fakes.model_server import FakeModelServer
from tests.app.test_cli_knowledge import WARRANTY, knowledge
from tests.store_contract import StoreKind

MODEL = "embed-test"


def embeddings(model_server: FakeModelServer) -> dict[str, str]:
    return {
        "EMBEDDING_MODEL": MODEL,
        "EMBEDDING_BASE_URL": model_server.base_url,
        "EMBEDDING_API_KEY": "sk-test",
        "LLM_MAX_RETRIES": "0",
    }


async def test_add_stores_vectors_and_search_finds_by_meaning(
    tmp_path: Path, kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    path = tmp_path / "warranty.md"
    path.write_text(WARRANTY)
    env = embeddings(model_server)
    code, out = await knowledge(tmp_path, kind, database, "add", str(path), **env)
    assert code == 0, out
    assert await kind.count(database, "knowledge_vectors", model=MODEL) == 2
    # One request for both passages, each with its heading path.
    (request,) = model_server.embedding_requests
    assert request["input"][1].startswith("Warranty terms › Kettles\n\nElectric kettles")

    _, out = await knowledge(tmp_path, kind, database, "search", "guarantee")
    assert out == "No passage matches.\n"  # full text alone: no passage holds the word
    code, out = await knowledge(tmp_path, kind, database, "search", "guarantee", **env)
    assert code == 0
    assert out.startswith("[K1] Warranty terms  (document #1")


async def test_an_embeddings_outage_refuses_the_document_whole(
    tmp_path: Path, kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    path = tmp_path / "warranty.md"
    path.write_text(WARRANTY)
    model_server.embedding_fault = "outage"
    env = embeddings(model_server)
    code, out = await knowledge(tmp_path, kind, database, "add", str(path), **env)
    assert code == 1
    assert out.splitlines()[0] == (
        f"failed     {path}: not embedded (HTTP 500: The server had an error while processing"
        " your request.); nothing stored"
    )
    assert await kind.count(database, "knowledge_documents") == 0
    assert await kind.count(database, "knowledge_chunks") == 0


async def test_reindex_embeds_documents_added_without_embeddings(
    tmp_path: Path, kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    path = tmp_path / "warranty.md"
    path.write_text(WARRANTY)
    code, _ = await knowledge(tmp_path, kind, database, "add", str(path))
    assert code == 0
    assert await kind.count(database, "knowledge_vectors") == 0
    code, out = await knowledge(tmp_path, kind, database, "reindex", **embeddings(model_server))
    assert code == 0, out
    assert out.startswith("replaced   #1 Warranty terms  ")
    assert await kind.count(database, "knowledge_vectors", model=MODEL) == 2
    code, out = await knowledge(
        tmp_path, kind, database, "reindex", **{**embeddings(model_server), "EMBEDDING_MODEL": "v2"}
    )
    assert code == 0, out
    assert await kind.count(database, "knowledge_vectors", model="v2") == 2
    assert await kind.count(database, "knowledge_vectors", model=MODEL) == 0
