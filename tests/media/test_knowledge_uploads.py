"""An uploaded file (the web console's, an operator's Telegram document) is loaded into a
real SQLite knowledge base by the same readers as a file on disk: under a source of its
own, replaced when uploaded again with other bytes, free when unchanged, and refused with
a reason when it is of another kind, too large or empty, leaving nothing stored."""

from __future__ import annotations

from core.domain.errors import AttachmentProblem
from core.domain.knowledge import Stored
from media.config import ReaderConfig
from media.knowledge_files import KnowledgeLoader, is_upload, upload_source
from media.reader_pool import DocumentReaders
from storage.sqlite.store import SqliteStore

PRICES = b"# Prices\n\n## Kettles\n\nThe Aqua kettle costs 49 euros.\n"


def test_an_upload_source_is_its_base_name_alone() -> None:
    assert upload_source("prices.md") == "upload:prices.md"
    assert upload_source("C:\\Users\\op\\prices.md") == "upload:prices.md"
    assert upload_source("../../etc/prices.md") == "upload:prices.md"
    assert upload_source("a\x00b\nc.md") == "upload:abc.md"
    assert upload_source("..") == "upload:document"
    assert len(upload_source("x" * 5000 + ".md")) <= len("upload:") + 200
    assert is_upload("upload:prices.md") and not is_upload("/srv/prices.md")


async def test_an_upload_is_added_replaced_and_unchanged(store: SqliteStore) -> None:
    async with DocumentReaders(ReaderConfig(processes=1)) as readers:
        loader = KnowledgeLoader(store.knowledge, readers, max_bytes=1000)
        added = await loader.load_upload(PRICES, name="prices.md", role="shop")
        again = await loader.load_upload(PRICES, name="prices.md", role="shop")
        changed = await loader.load_upload(
            PRICES.replace(b"49", b"55"), name="prices.md", role="shop"
        )
    assert (added.stored, again.stored, changed.stored) == (
        Stored.ADDED,
        Stored.UNCHANGED,
        Stored.REPLACED,
    )
    assert added.source == "upload:prices.md" and added.document is not None
    assert changed.document is not None and changed.document.id == added.document.id
    found = await store.knowledge.search("kettle price", role="shop", limit=3)
    assert found is not None and "55 euros" in found[0].text
    assert found[0].section == "Prices › Kettles"


async def test_a_refused_upload_stores_nothing(store: SqliteStore) -> None:
    async with DocumentReaders(ReaderConfig(processes=1)) as readers:
        loader = KnowledgeLoader(store.knowledge, readers, max_bytes=1000)
        other_kind = await loader.load_upload(PRICES, name="prices.exe")
        too_large = await loader.load_upload(b"x " * 600, name="big.txt")
        empty = await loader.load_upload(b"  \n ", name="blank.txt")
        broken = await loader.load_upload(b"%PDF-1.7 not a pdf", name="broken.pdf")
    assert "not a kind loaded" in other_kind.problem
    assert "over KNOWLEDGE_MAX_DOCUMENT_BYTES" in too_large.problem
    assert empty.problem == "no text in the file"
    assert broken.problem and broken.document is None
    assert (other_kind.refusal, too_large.refusal, empty.refusal, broken.refusal) == (
        AttachmentProblem.UNSUPPORTED,
        AttachmentProblem.TOO_LARGE,
        AttachmentProblem.NO_TEXT,
        AttachmentProblem.UNREADABLE,
    )
    assert await store.knowledge.documents() == []
