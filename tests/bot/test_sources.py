"""Sources from a provider's raw reply fields (`core.domain.sources`), and their Telegram list
(`bot.transport.render.sources_parts`, `bot.transport.delivery.attach`): bounds and malformed
shapes."""

from __future__ import annotations

from typing import Any

import pytest
from telegram import MessageEntity
from telegramify_markdown import utf16_len

from bot.transport.delivery import attach
from bot.transport.render import MAX_ENTITIES, Part, sources_parts
from core.domain.sources import MAX_SOURCES, MAX_TITLE_CHARS, MAX_URL_CHARS, Source, extract_sources
from core.prompting.language import written_language


def test_citations_number_the_sources_and_search_results_title_them() -> None:
    extras = {
        "citations": ["https://a.example", {"url": "https://b.example", "title": "B"}, 7,
                      "https://a.example", "https://c.example"],
        "search_results": [{"title": "A", "url": "https://a.example"}],
    }  # fmt: skip
    assert extract_sources(extras) == (
        Source(1, "https://a.example", "A"),
        Source(2, "https://b.example", "B"),
        Source(5, "https://c.example", None),
    )


@pytest.mark.parametrize(
    "extras",
    [{}, {"citations": None}, {"citations": "https://a.example"}, {"citations": {"a": 1}},
     {"search_results": [None, 3, [], {"url": None}]}, {"citations": [b"https://a.example"]},
     {"citations": ["not a url", " ", "https://a example", "https://a.example/\x00"]}],
)  # fmt: skip
def test_malformed_shapes_give_no_sources(extras: dict[str, Any]) -> None:
    assert extract_sources(extras) == ()


def test_counts_and_lengths_are_bounded() -> None:
    long_url = "https://a.example/" + "x" * MAX_URL_CHARS
    citations = [long_url, *(f"https://s{n}.example" for n in range(200))]
    results = [{"url": "https://s0.example", "title": "T\n\t" + "ж" * 1000}]
    sources = extract_sources({"citations": citations, "search_results": results})
    assert len(sources) == MAX_SOURCES
    assert sources[0] == Source(2, "https://s0.example", sources[0].title)
    title = sources[0].title or ""
    assert len(title) == MAX_TITLE_CHARS and title.startswith("T ж") and title.endswith("…")


def test_only_http_urls_with_a_host_are_web_links() -> None:
    links = ["https://a.example/x", "HTTP://A.EXAMPLE", "ftp://a.example", "javascript:alert(1)",
             "https:///nohost", "mailto:a@b.example"]  # fmt: skip
    assert [Source(1, url).is_web_link for url in links] == [True, True] + [False] * 4


def test_a_long_list_is_packed_into_parts_within_the_limit() -> None:
    sources = [Source(n, f"https://s{n}.example/p", "Заголовок 🙂 " * 10) for n in range(1, 21)]
    parts = sources_parts("Sources", sources, limit=1000)
    assert len(parts) > 1 and parts[0].text.startswith("Sources\n[1] ")
    for part in parts:
        size = utf16_len(part.text)
        assert size <= 1000
        for entity in part.entities:
            assert entity.offset >= 0 and entity.offset + entity.length <= size
    links = [e for part in parts for e in part.entities if e.type == MessageEntity.TEXT_LINK]
    assert [e.url for e in links] == [s.url for s in sources]


def test_attach_keeps_a_message_under_the_entity_limit() -> None:
    full = Part("x" * 200, tuple(MessageEntity("bold", n, 1) for n in range(MAX_ENTITIES)))
    block = Part("Sources", (MessageEntity("bold", 0, 7),))
    assert attach([full], block) == [full, block]
    [joined] = attach([Part("🙂 answer", ())], block)
    assert joined.text == "🙂 answer\n\nSources"
    assert joined.entities[0].offset == utf16_len("🙂 answer\n\n")


@pytest.mark.parametrize(
    ("texts", "expected"),
    [(["Помоги спланировать сад"], "ru"), (["Help me plan the garden at my house"], "en"),
     (["Hilf mir, den Garten zu planen"], None), (["Допоможіть спланувати сад і город"], None),
     (["ok"], None), (["Помоги", "with the garden please and the house"], "en"), ([], None)],
)  # fmt: skip
def test_written_language_answers_only_on_plain_evidence(
    texts: list[str], expected: str | None
) -> None:
    assert written_language(texts) == expected
