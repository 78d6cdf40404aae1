"""Documents cut into passages (`core.domain.chunking`): chunks keep the heading path above
them and their page, stay within the size, cover the whole text in order, and cost time
linear in the text, whatever its shape."""

from __future__ import annotations

import pytest

from core.domain.chunking import CHUNK_CHARS, MAX_HEADING_CHARS, chunk_text, top_heading
from core.domain.knowledge import Chunk

GUIDE = """Read this first.

# Warranty terms

Every appliance carries a warranty.

## Kettles ##

Kettles are covered for 24 months.

```
# a comment in code, not a heading
```

Setext title
============

Under the setext heading.

### Deep
Deep text.
# Other
Other text.
"""


def test_each_chunk_keeps_the_heading_path_above_it() -> None:
    chunks = chunk_text(GUIDE, outline=True)
    assert [(c.position, c.section, c.text) for c in chunks] == [
        (0, "", "Read this first."),
        (1, "Warranty terms", "Every appliance carries a warranty."),
        (
            2,
            "Warranty terms › Kettles",
            "Kettles are covered for 24 months.\n\n```\n# a comment in code, not a heading\n```",
        ),
        (3, "Setext title", "Under the setext heading."),
        (4, "Setext title › Deep", "Deep text."),
        (5, "Other", "Other text."),
    ]
    assert {c.page for c in chunks} == {None}


def test_text_without_an_outline_has_no_headings() -> None:
    """Plain text: a line starting with # is text."""
    [chunk] = chunk_text("# not a heading\n\nplain text", outline=False)
    assert (chunk.section, chunk.text) == ("", "# not a heading\n\nplain text")


def test_a_front_matter_or_a_rule_is_no_heading() -> None:
    text = "---\ntitle: x\n---\n\nBody.\n\n---\n\nMore."
    assert {c.section for c in chunk_text(text, outline=True)} == {""}


def test_long_text_is_cut_within_the_size_in_order_and_whole() -> None:
    """Every chunk fits; neighbours overlap a little; no sentence of the text is lost."""
    sentences = [f"Sentence number {n} says something about kettles." for n in range(400)]
    text = "\n\n".join(" ".join(sentences[i : i + 5]) for i in range(0, 400, 5))
    chunks = chunk_text(text, outline=False)
    assert len(chunks) > 10
    assert all(len(c.text) <= CHUNK_CHARS for c in chunks)
    assert [c.position for c in chunks] == list(range(len(chunks)))
    joined = " ".join(c.text for c in chunks)
    assert all(sentence in joined for sentence in sentences)
    starts = [text.index(c.text) for c in chunks]
    assert starts == sorted(starts)


def test_a_chunk_names_the_page_it_is_on_and_never_spans_two() -> None:
    pages = ["First page text. " * 20, "Second page text. " * 100, "Third."]
    text = "\n\n".join(pages)
    starts = [(0, 1), (len(pages[0]) + 2, 2), (len(pages[0]) + len(pages[1]) + 4, 5)]
    chunks = chunk_text(text, outline=False, pages=starts)
    assert chunks[0].page == 1
    assert {c.page for c in chunks} == {1, 2, 5}
    for chunk in chunks:
        assert ("First" in chunk.text) + ("Second" in chunk.text) + ("Third" in chunk.text) == 1
        expected = 1 if "First" in chunk.text else 2 if "Second" in chunk.text else 5
        assert chunk.page == expected


def test_a_heading_keeps_a_bounded_title_on_one_line() -> None:
    [chunk] = chunk_text("# " + "Long   title " * 100 + "\n\nBody.", outline=True)
    assert len(chunk.section) == MAX_HEADING_CHARS
    assert "  " not in chunk.section


@pytest.mark.parametrize(
    "hostile",
    [
        "x" * 2_000_000,  # no boundary at all
        " ".join(["word"] * 400_000),  # words, no sentence end
        "### h\n" * 500_000,  # headings only
        "```\n" * 500_000,  # fences only
        "- x\n" * 500_000,  # a list
        "t\n---\n\n" * 300_000,  # setext headings
    ],
    ids=["boundless", "words", "headings", "fences", "list", "setext"],
)
def test_hostile_text_is_cut_in_bounded_time(hostile: str) -> None:
    """Two million characters of any shape are cut, every chunk within the size, inside
    the test's time limit (a few seconds here; a cost quadratic in the text would take
    many minutes: `python -m bench` does not time this, the timeout bounds it)."""
    chunks = chunk_text(hostile, outline=True)
    assert chunks
    assert all(len(c.text) <= CHUNK_CHARS for c in chunks)


def sections(chunks: list[Chunk]) -> list[str]:
    return [c.section for c in chunks]


def test_one_heading_over_all_the_text_titles_it_and_leaves_the_paths() -> None:
    chunks = chunk_text(
        "# Warranty terms\n\nEvery appliance.\n\n## Kettles\n\n24 months.\n\n### Lids\n\nNone.",
        outline=True,
    )
    assert sections(chunks) == [
        "Warranty terms",
        "Warranty terms › Kettles",
        "Warranty terms › Kettles › Lids",
    ]
    assert top_heading(chunks) == "Warranty terms"


def test_no_title_when_some_text_lies_outside_one_top_heading() -> None:
    before = chunk_text(GUIDE, outline=True)  # "Read this first." before its first heading
    assert before[0].section == ""
    assert top_heading(before) == ""
    two = chunk_text("# Kettles\n\n24 months.\n\n# Toasters\n\n12 months.", outline=True)
    assert top_heading(two) == ""
    # A top heading that merely begins another's name is not over it.
    prefix = [Chunk(0, "Kettle", None, "a"), Chunk(1, "Kettles › Lids", None, "b")]
    assert top_heading(prefix) == ""
    plain = chunk_text("Just text.", outline=False)
    assert top_heading(plain) == ""
    assert top_heading([]) == ""
