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
    assert (found[0].title, found[0].section) == ("Prices", "Prices › Kettles")
    assert found[0].place == "Prices › Kettles"  # the title's heading shown once


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


async def test_a_title_given_or_declared_shows_the_top_heading_in_the_place(
    store: SqliteStore,
) -> None:
    """The heading over all the text titles a document only when no other title is given
    or declared: under an explicit title, or an HTML <title> other than its H1, a passage's
    place shows the heading; reading a document again keeps its stored title."""
    page = (
        b"<html><head><title>Price list</title></head><body><h1>Prices</h1>"
        b"<h2>Kettles</h2><p>The Aqua kettle costs 49 euros.</p></body></html>"
    )
    async with DocumentReaders(ReaderConfig(processes=1)) as readers:
        loader = KnowledgeLoader(store.knowledge, readers, max_bytes=1000)
        given = await loader.load_upload(PRICES, name="given.md", title="Shop prices")
        declared = await loader.load_upload(page, name="prices.html")
        headed = await loader.load_upload(PRICES, name="headed.md")
        again = await loader.load_bytes(
            PRICES, name="headed.md", source="upload:headed.md", again=True
        )
        kept = await loader.load_bytes(
            PRICES, name="given.md", source="upload:given.md", again=True
        )
    assert (again.stored, kept.stored) == (Stored.REPLACED, Stored.REPLACED)
    found = await store.knowledge.search("kettle euros", role=None, limit=5)
    assert found is not None
    assert sorted(p.place for p in found) == [
        "Price list › Prices › Kettles",  # its <title> is not its H1
        "Prices › Kettles",  # read again: the heading titles it still, shown once
        "Shop prices › Prices › Kettles",  # the given title, kept on reading again
    ]
    titled = [loaded.document for loaded in (given, declared, headed)]
    assert [d.title if d else None for d in titled] == [
        "Shop prices",
        "Price list",
        "Prices",
    ]
