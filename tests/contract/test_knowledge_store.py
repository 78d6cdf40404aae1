"""The knowledge base on SQLite and PostgreSQL (`tests.store_contract.STORE_KINDS`): a
document is stored whole with its chunks, replaced whole when its source comes again
changed, left alone when unchanged, and removed with its chunks; search ranks the passage
holding the fact first among many documents, serves a role its own documents and the
untagged ones, takes any text as words (never as query syntax), and remembers an empty
knowledge base for a moment."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from core.domain.chunking import chunk_text
from core.domain.knowledge import Chunk, KnowledgeBase, NewDocument, Stored
from storage.knowledge import EMPTY_TTL_SECONDS, EmptyMemo
from tests.store_contract import Rows, StoreKind

if TYPE_CHECKING:
    from app.stores import Store

KETTLES = """# Warranty terms

Every appliance we sell carries a warranty from the day of purchase.

## Kettles

Electric kettles are covered for 24 months. The limescale inside is not a defect.

## Toasters

Toasters are covered for 12 months.
"""

FILLER_TOPICS = [
    "delivery", "payment", "returns", "opening hours", "loyalty cards", "gift wrapping",
    "store locations", "careers", "privacy", "cookies", "recycling", "spare parts",
]  # fmt: skip


def document(source: str, content: str = "v1", *, title: str = "", role: str | None = None):
    return NewDocument(title or source, source, role, f"hash-{content}")


def chunks(*texts: str, section: str = "") -> list[Chunk]:
    return [Chunk(n, section, None, text) for n, text in enumerate(texts)]


def filler(topic: str) -> str:
    """A page of ordinary shop prose about `topic`, full of the words questions use."""
    return (
        f"# About {topic}\n\nWhat is the {topic} policy of the shop? The {topic} rules are"
        f" how we work, and how long it is for you to wait is in the {topic} notes.\n\n"
        f"## How {topic} works\n\nIf you have a question on {topic}, ask in the shop: the"
        " staff is there for you and will tell you what to do and how long it takes.\n"
    )


async def put_text(
    knowledge: KnowledgeBase, source: str, text: str, *, role: str | None = None
) -> int:
    stored, _ = await knowledge.put(
        document(source, text, role=role), chunk_text(text, outline=True), at=1000.0
    )
    return stored.id


async def test_a_document_is_added_with_its_chunks(store: Store, rows: Rows) -> None:
    """Its row lists its title, source, role, hash, time and chunk count; each chunk
    keeps its position, section and page."""
    parts = [
        Chunk(0, "Warranty terms", None, "one"),
        Chunk(1, "Warranty terms › Kettles", 2, "two"),
    ]
    stored, outcome = await store.knowledge.put(
        NewDocument("Warranty", "/docs/w.md", "support", "abc"), parts, at=1234.5
    )
    assert outcome is Stored.ADDED
    assert (stored.title, stored.source, stored.role, stored.content_hash) == (
        "Warranty", "/docs/w.md", "support", "abc",
    )  # fmt: skip
    assert (stored.chunks, stored.added_at) == (2, 1234.5)
    assert await store.knowledge.documents() == [stored]
    assert await store.knowledge.document("/docs/w.md") == stored
    assert await store.knowledge.document("/docs/other.md") is None
    assert await store.knowledge.count() == 2
    assert await rows("knowledge_chunks", document_id=stored.id, position=1, page=2) == 1
    passages = await store.knowledge.search("kettles two", role="support", limit=5)
    assert [(p.section, p.page, p.text, p.title) for p in passages] == [
        ("Warranty terms › Kettles", 2, "two", "Warranty")
    ]


async def test_a_changed_source_replaces_every_chunk_and_keeps_its_id(
    store: Store, rows: Rows
) -> None:
    first, _ = await store.knowledge.put(
        document("/docs/a.md", "v1"), chunks("old apples", "old pears", "old plums"), at=1.0
    )
    second, outcome = await store.knowledge.put(
        document("/docs/a.md", "v2"), chunks("new cherries"), at=2.0
    )
    assert outcome is Stored.REPLACED
    assert (second.id, second.content_hash, second.chunks, second.added_at) == (
        first.id, "hash-v2", 1, 2.0,
    )  # fmt: skip
    assert await rows("knowledge_chunks") == 1
    assert await rows("knowledge_documents") == 1
    assert await store.knowledge.search("apples pears plums", role=None, limit=5) == []
    found = await store.knowledge.search("cherries", role=None, limit=5)
    assert [p.text for p in found] == ["new cherries"]


async def test_a_new_title_or_role_replaces_too(store: Store) -> None:
    await store.knowledge.put(document("/a.md", title="A"), chunks("text"), at=1.0)
    _, retitled = await store.knowledge.put(document("/a.md", title="B"), chunks("text"), at=2.0)
    _, moved = await store.knowledge.put(
        document("/a.md", title="B", role="sales"), chunks("text"), at=3.0
    )
    assert (retitled, moved) == (Stored.REPLACED, Stored.REPLACED)
    [listed] = await store.knowledge.documents()
    assert (listed.title, listed.role) == ("B", "sales")


async def test_an_unchanged_source_writes_nothing(store: Store, rows: Rows) -> None:
    """The same source, content, title and role: the stored document comes back as it
    was (its time too), whatever chunks were offered."""
    first, _ = await store.knowledge.put(document("/docs/a.md"), chunks("kept text"), at=1.0)
    again, outcome = await store.knowledge.put(
        document("/docs/a.md"), chunks("other", "chunks"), at=2.0
    )
    assert outcome is Stored.UNCHANGED
    assert again == first
    assert await rows("knowledge_chunks") == 1
    assert [p.text for p in await store.knowledge.search("kept", role=None, limit=3)] == [
        "kept text"
    ]


async def test_a_document_stored_again_on_purpose_is_replaced(store: Store) -> None:
    """`again` (a reindex) cuts an unchanged document anew."""
    first, _ = await store.knowledge.put(document("/a.md"), chunks("old cut"), at=1.0)
    again, outcome = await store.knowledge.put(
        document("/a.md"), chunks("new", "cut"), at=2.0, again=True
    )
    assert (outcome, again.id, again.chunks) == (Stored.REPLACED, first.id, 2)
    assert [p.text for p in await store.knowledge.search("cut", role=None, limit=3)] == ["cut"]


async def test_removed_documents_take_their_chunks_and_passages_along(
    store: Store, rows: Rows
) -> None:
    gone = await put_text(store.knowledge, "/gone.md", "# Gone\n\nVanishing words here.")
    kept = await put_text(store.knowledge, "/kept.md", "# Kept\n\nStaying words here.")
    assert await store.knowledge.remove([gone, 99999]) == [gone]
    assert await store.knowledge.remove([gone]) == []
    assert [d.id for d in await store.knowledge.documents()] == [kept]
    assert await rows("knowledge_chunks", document_id=gone) == 0
    assert await store.knowledge.search("vanishing", role=None, limit=5) == []
    assert len(await store.knowledge.search("words", role=None, limit=5)) == 1


async def test_search_ranks_the_passage_holding_the_fact_first(store: Store) -> None:
    """Among a dozen documents of shop prose that share the question's common words, the
    passage stating the kettles' warranty comes first, with its document and headings,
    and scores fall from best to worst."""
    for topic in FILLER_TOPICS:
        await put_text(store.knowledge, f"/docs/{topic}.md", filler(topic))
    kettles = await put_text(store.knowledge, "/docs/warranty.md", KETTLES)
    for topic in FILLER_TOPICS[:6]:
        await put_text(store.knowledge, f"/docs/more-{topic}.md", filler(topic) * 2)
    for question in [
        "How long is the warranty on my kettle? Is it 24 months?",
        "kettles warranty",
        "What is the policy if the electric kettle breaks, how long do I have?",
    ]:
        found = await store.knowledge.search(question, role=None, limit=5)
        assert found, question
        best = found[0]
        assert (best.document_id, best.section) == (kettles, "Warranty terms › Kettles"), question
        assert "24 months" in best.text
        assert best.title == "/docs/warranty.md"
        scores = [p.score for p in found]
        assert scores == sorted(scores, reverse=True)
    assert len(await store.knowledge.search("shop staff", role=None, limit=3)) == 3


async def test_words_most_passages_hold_are_left_out_unless_all_are(store: Store) -> None:
    """The word "the" in every passage neither ranks nor brings in a passage when the query has a
    rarer word; a query of such words alone still finds passages."""
    texts = [f"The note number {n} on the shelf." for n in range(9)] + ["The kettles boil."]
    await store.knowledge.put(document("/notes.md"), chunks(*texts), at=1.0)
    found = await store.knowledge.search("the kettles", role=None, limit=5)
    assert [p.text for p in found] == ["The kettles boil."]
    assert len(await store.knowledge.search("the on", role=None, limit=5)) == 5


async def test_common_words_still_find_when_the_rarer_ones_are_in_no_passage(
    store: Store,
) -> None:
    """A small knowledge base where every passage holds "kettle": asked about a kettle's
    price, a word no passage holds, the search falls back on every word of the query
    instead of finding nothing."""
    await store.knowledge.put(
        document("/prices.md"), chunks("The Aqua kettle costs 49 euros."), at=1.0
    )
    found = await store.knowledge.search("kettle price", role=None, limit=3)
    assert [p.text for p in found] == ["The Aqua kettle costs 49 euros."]


async def test_a_role_reads_its_own_documents_and_the_untagged_ones(store: Store) -> None:
    await put_text(store.knowledge, "/all.md", "Refund rules for everyone.")
    await put_text(store.knowledge, "/sales.md", "Refund rules for sales.", role="sales")
    await put_text(store.knowledge, "/legal.md", "Refund rules for legal.", role="legal")

    async def texts(role: str | None) -> set[str]:
        return {p.text for p in await store.knowledge.search("refund", role=role, limit=10)}

    assert await texts("sales") == {"Refund rules for everyone.", "Refund rules for sales."}
    assert await texts("legal") == {"Refund rules for everyone.", "Refund rules for legal."}
    assert await texts(None) == {"Refund rules for everyone."}
    assert await texts("support") == {"Refund rules for everyone."}


@pytest.mark.parametrize(
    "query",
    [
        '"', '""', "*", "NEAR(", "NEAR(a b", "-", "- -", "(", ")", "AND", "OR", "NOT", "or",
        "text:", "section:kettle", "^", "'", "\\", "a & b | !c", "<->", "kettles*", '"kettles',
        "x" * 10_000, "kettles " * 2_000, " ".join(f"w{n}" for n in range(5_000)), "\x00",
    ],
)  # fmt: skip
async def test_any_query_text_is_words_never_syntax(store: Store, query: str) -> None:
    """Quotes, operators, brackets, column filters, prefixes, NUL and 10,000 characters
    neither fail nor mean anything to the index: a query is searched for as its words."""
    await put_text(store.knowledge, "/k.md", KETTLES)
    found = await store.knowledge.search(query, role=None, limit=3)
    assert len(found) <= 3
    if "kettles" in query:
        assert found


@pytest.mark.parametrize(("query", "limit"), [("kettles", 3), ("?!", 3), ("kettles", 0)])
async def test_an_empty_knowledge_base_answers_none_not_an_empty_list(
    store: Store, query: str, limit: int
) -> None:
    """None tells the engine there is no knowledge base to read (its calls are sent what
    they are sent without one); an empty list is a search that found nothing."""
    assert await store.knowledge.search(query, role=None, limit=limit) is None
    await put_text(store.knowledge, "/k.md", KETTLES)
    assert await store.knowledge.search("?!", role=None, limit=limit) == []
    await store.knowledge.remove([d.id for d in await store.knowledge.documents()])
    assert await store.knowledge.search(query, role=None, limit=limit) is None


@pytest.mark.parametrize("query", ["", "   ", '"', "*", "-", "(", "?!.,;:", "—«»"])
async def test_a_query_of_punctuation_alone_finds_nothing(store: Store, query: str) -> None:
    await put_text(store.knowledge, "/k.md", KETTLES)
    assert await store.knowledge.search(query, role=None, limit=3) == []


async def test_words_are_found_in_every_script_and_without_their_accents(store: Store) -> None:
    """Cyrillic in any case, Arabic and Devanagari words whole (their marks inside)."""
    await put_text(store.knowledge, "/ru.md", "# Гарантия\n\nЧайники: ДВА года гарантии.")
    await put_text(store.knowledge, "/ar.md", "الضمان سنتان للغلايات")
    await put_text(store.knowledge, "/hi.md", "केतली की वारंटी दो साल है")
    for query, expected in [
        ("чайники два", "Чайники: ДВА года гарантии."),
        ("гарантия", "Чайники: ДВА года гарантии."),
        ("للغلايات", "الضمان سنتان للغلايات"),
        ("वारंटी", "केतली की वारंटी दो साल है"),
    ]:
        found = await store.knowledge.search(query, role=None, limit=3)
        assert [p.text for p in found][:1] == [expected], query


async def test_an_empty_knowledge_base_is_remembered_for_a_moment(
    store: Store, kind: StoreKind, database: str
) -> None:
    """Once a search found the knowledge base empty, searches answer without the database
    for `EMPTY_TTL_SECONDS`: a document another process stores is found after that, one
    this process stores at once."""
    now = [0.0]
    store.knowledge.memo = EmptyMemo(clock=lambda: now[0])  # type: ignore[attr-defined]
    other = await kind.open(database)
    try:
        assert await store.knowledge.search("kettles", role=None, limit=3) is None
        await put_text(other.knowledge, "/k.md", KETTLES)
        now[0] += EMPTY_TTL_SECONDS * 0.9
        assert await store.knowledge.search("kettles", role=None, limit=3) is None
        now[0] += EMPTY_TTL_SECONDS * 0.2
        assert await store.knowledge.search("kettles", role=None, limit=3)
        await other.knowledge.remove([d.id for d in await other.knowledge.documents()])
        assert await store.knowledge.search("kettles", role=None, limit=3) is None
        await put_text(store.knowledge, "/k2.md", KETTLES)
        assert await store.knowledge.search("kettles", role=None, limit=3)
    finally:
        await other.close()


async def test_text_with_nul_characters_is_stored_without_them(store: Store) -> None:
    stored, _ = await store.knowledge.put(
        NewDocument("Ti\x00tle", "/nul.md", None, "h"),
        [Chunk(0, "Sec\x00tion", None, "Nul\x00l text")],
        at=1.0,
    )
    assert stored.title == "Title"
    [passage] = await store.knowledge.search("null", role=None, limit=3)
    assert (passage.title, passage.section, passage.text) == ("Title", "Section", "Null text")
