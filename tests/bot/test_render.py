"""Markdown → Telegram parts: nothing vanishes, parts fit, entities stay inside their text."""

from __future__ import annotations

import random
import re

import pytest
from telegram import MessageEntity
from telegramify_markdown import utf16_len

from bot.transport.render import MAX_ENTITIES, Part, plain_parts, render


def _check(parts: list[Part], limit: int) -> None:
    """Assert the invariants every part must keep for Telegram to accept it."""
    for part in parts:
        size = utf16_len(part.text)
        assert 0 < size <= limit
        assert part.text.strip() == part.text
        assert len(part.entities) <= MAX_ENTITIES
        for ent in part.entities:
            assert ent.length > 0
            assert ent.offset >= 0
            assert ent.offset + ent.length <= size
        # no entity boundary inside a surrogate pair
        units = part.text.encode("utf-16-le")
        for ent in part.entities:
            for pos in (ent.offset, ent.offset + ent.length):
                if pos < size:
                    unit = int.from_bytes(units[2 * pos : 2 * pos + 2], "little")
                    assert not 0xDC00 <= unit <= 0xDFFF


def _visible(parts: list[Part]) -> str:
    """Everything a user can see or open: the texts and the link targets."""
    urls = [e.url or "" for p in parts for e in p.entities]
    return "".join(p.text for p in parts) + " " + " ".join(urls)


def _entity_text(part: Part, ent: MessageEntity) -> str:
    """The slice of a part's text an entity covers (UTF-16 offsets)."""
    units = part.text.encode("utf-16-le")
    return units[2 * ent.offset : 2 * (ent.offset + ent.length)].decode("utf-16-le")


@pytest.mark.parametrize(
    ("markdown", "shown"),
    [
        ("use the <div> tag", "use the <div> tag"),
        ("a < b > c", "a < b > c"),
        ("<script>alert(1)</script>", "<script>alert(1)</script>"),
        ("write &amp; or &lt; literally", "write &amp; or &lt; literally"),
        ("<!-- a comment -->", "<!-- a comment -->"),
        ("text\n\n<div>\nblock\n</div>\n\nafter", "<div>\nblock\n</div>"),
        ("already escaped \\<b> stays", "already escaped <b> stays"),
        ("| <a> | b&c |\n|---|---|\n| 1 | 2 |", "<a> | b&c"),
        ("- <li> one\n  - <ul> two", "<ul> two"),
        ("||hidden <b> text||", "hidden <b> text"),
        ("\\(x < y\\)", "x < y"),
    ],
)
def test_html_lookalikes_are_shown_literally(markdown: str, shown: str) -> None:
    """Text that looks like HTML or entities is displayed as written, not dropped as markup."""
    parts = render(markdown)
    assert shown in "".join(p.text for p in parts)


def test_code_keeps_angle_brackets_without_escapes() -> None:
    """Code blocks and spans show `<tag>` and `&amp;` verbatim, with no backslashes added."""
    parts = render('Run `<b>` &amp; then:\n\n```html\n<div class="x">&amp;</div>\n```')
    (part,) = parts
    assert "\\" not in part.text
    assert '<div class="x">&amp;</div>' in part.text
    kinds = {e.type: _entity_text(part, e) for e in part.entities}
    assert kinds[MessageEntity.CODE] == "<b>"
    assert kinds[MessageEntity.PRE] == '<div class="x">&amp;</div>'


def test_fence_inside_html_block_is_still_code() -> None:
    """A fence that raw HTML would have swallowed becomes a code block once `<` is escaped."""
    (part,) = render("<div>\n```\n<x>\n```\n</div>")
    assert part.text == "<div>\n<x>\n</div>"
    assert [(e.type, _entity_text(part, e)) for e in part.entities] == [(MessageEntity.PRE, "<x>")]


def test_formatting_and_utf16_offsets_with_cyrillic_and_emoji() -> None:
    """Bold after emoji gets UTF-16 offsets: an emoji counts as two code units."""
    (part,) = render("Привет **мир** 😀 **жирный** and `код`")
    assert part.text == "Привет мир 😀 жирный and код"
    covered = [(e.type, _entity_text(part, e)) for e in part.entities]
    assert covered == [
        (MessageEntity.BOLD, "мир"),
        (MessageEntity.BOLD, "жирный"),
        (MessageEntity.CODE, "код"),
    ]
    assert part.entities[1].offset == 14  # "Привет мир " = 11, "😀" = 2, " " = 1


@pytest.mark.parametrize(
    "markdown",
    ["**unbalanced bold", "snake_case_name and _half", "`open backtick", "a * b ** c", "~~x"],
)
def test_unbalanced_markup_keeps_its_characters(markdown: str) -> None:
    """Unbalanced delimiters are shown as typed rather than eaten."""
    (part,) = render(markdown)
    assert part.text == markdown


def test_links_keep_text_and_target() -> None:
    """A Markdown link becomes a text link; a target Telegram would reject is shown as text."""
    (part,) = render("[docs](https://example.com/?a=1&b=2), [bare](example.org) and [odd](note)")
    assert part.text == "docs, bare and odd (note)"
    urls = [e.url for e in part.entities]
    assert urls == ["https://example.com/?a=1&b=2", "https://example.org"]


def test_fence_info_string_that_is_not_a_language_is_shown() -> None:
    """A plain language name labels the block; any other info string becomes its first line."""
    (plain,) = render("```python\nx = 1\n```")
    assert (plain.text, plain.entities[0].language) == ("x = 1", "python")
    (odd,) = render("> ```py title=<a.py>\n> x = 1\n> ```")
    assert odd.text == "py title=<a.py>\nx = 1"
    assert all(e.length == utf16_len(odd.text) for e in odd.entities)
    assert odd.entities[0].language is None


def test_math_and_prices() -> None:
    """Math shows its `<` as code; dollar prices stay text and their `<b>` stays visible."""
    assert [p.text for p in render("$a<b$ and \\(x < y\\)")] == ["a<b and x < y"]
    assert [p.text for p in render("$10 < $20 <b>")] == ["$10 < $20 <b>"]


def test_tag_opening_a_line_inside_a_code_span() -> None:
    """A `<div>` starting a line inside a multi-line code span stays in the code, not HTML."""
    for markdown in ("`a\n<div>b`", "- `a\n<div>b`", "> `a\n> <div>b`"):
        (part,) = render(markdown)
        assert "a <div>b" in part.text
        assert part.entities[0].type == MessageEntity.CODE


def test_empty_links_and_images_keep_their_targets() -> None:
    """`[](url)` and `![](url)` would render as nothing: they are shown as written."""
    (part,) = render("see [](https://a.example) and ![](https://b.example/x.png)")
    assert "https://a.example" in part.text
    assert "https://b.example/x.png" in part.text


def test_converter_failure_falls_back_to_raw_markdown(monkeypatch: pytest.MonkeyPatch) -> None:
    """If the converter raises, the raw Markdown is sent as plain text rather than nothing."""

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("converter bug")

    monkeypatch.setattr("telegramify_markdown.convert", broken)
    assert render("**bold** <b>") == [Part("**bold** <b>", ())]


def test_nested_lists_and_tables_render_their_words() -> None:
    """Nested lists and tables keep every cell and item."""
    md = "- one\n  - two\n    - three\n\n| col A | col B |\n|---|---|\n| x1 | y2 |"
    text = "".join(p.text for p in render(md))
    for word in ("one", "two", "three", "col A", "col B", "x1", "y2"):
        assert word in text


def test_empty_input_gives_no_parts() -> None:
    """Blank Markdown yields nothing to send; Markdown that renders blank falls back to raw."""
    assert render("") == []
    assert render("  \n\n ") == []
    assert plain_parts("") == []


def test_long_answer_splits_on_paragraphs() -> None:
    """Paragraphs are never cut when each fits: every part ends at a paragraph boundary."""
    paragraphs = [f"Paragraph {i} " + "word " * 60 for i in range(40)]
    parts = render("\n\n".join(paragraphs), limit=1000)
    _check(parts, 1000)
    assert len(parts) > 1
    for part in parts:
        assert part.text.startswith("Paragraph ")
        assert part.text.endswith("word")


def test_line_then_word_then_hard_split() -> None:
    """Without paragraphs it splits on lines, then words, then anywhere (never inside a pair)."""
    lines = plain_parts("\n".join(["line " + "x" * 20] * 10), limit=60)
    assert all(p.startswith("line ") for p in lines)
    words = plain_parts(" ".join(["word"] * 50), limit=23)
    assert all(set(p.split()) == {"word"} for p in words)
    hard = plain_parts("😀" * 9, limit=4)
    assert hard == ["😀😀"] * 4 + ["😀"]


def test_formatting_is_clipped_across_parts() -> None:
    """A bold run cut by a split stays bold in both parts."""
    parts = render("**" + ("bold " * 40).strip() + "**", limit=64)
    _check(parts, 64)
    assert len(parts) > 1
    for part in parts:
        assert [e.type for e in part.entities] == [MessageEntity.BOLD]
        assert _entity_text(part, part.entities[0]) == part.text


def test_more_than_100_entities_split_earlier() -> None:
    """A message never carries more than 100 entities: the text is split sooner, none dropped."""
    md = " ".join(f"**b{i}**" for i in range(250))
    parts = render(md)
    _check(parts, 4096)
    assert sum(len(p.entities) for p in parts) == 250
    assert [len(p.entities) for p in parts] == [100, 100, 50]


def test_code_block_longer_than_limit() -> None:
    """A code block bigger than a message spreads over parts, each a `pre` entity."""
    code = "\n".join(f"print({i})  # <tag> & more" for i in range(400))
    parts = render(f"```python\n{code}\n```")
    _check(parts, 4096)
    assert len(parts) > 1
    assert "\n".join(p.text for p in parts) == code
    assert all(p.entities[0].type == MessageEntity.PRE for p in parts)


_FRAGMENTS = [
    "**",
    "*",
    "_",
    "__",
    "`",
    "~~s~~",  # bare "~~" pairs build `~~~info` fences at line start: see the report
    "||",
    "<",
    ">",
    "<div>",
    "</div>",
    "<b>",
    "&amp;",
    "&",
    "&#65;",
    "\\",
    "[",
    "]",
    "(",
    ")",
    "](",
    "#",
    "# ",
    "- ",
    "1. ",
    "> ",
    "|",
    "---",
    "\n",
    "\n\n",
    "\n```\n",
    "    ",
    " ",
    "😀",
    "🇺🇦",
    "Привет",
    "ё",
    "<!--",
    "-->",
    "<br/>",
    "<http://a.b>",
    "{",
    "}",
    "!",
    "\t",
    "<script>",
    "'",
    '"',
]


def _hostile(rng: random.Random, tokens: int) -> tuple[str, list[str]]:
    """Random Markdown soup with unique marker words that must all survive."""
    words = [f"w{rng.randrange(10**6)}q{i}" for i in range(tokens)]
    chunks: list[str] = []
    for word in words:
        chunks.extend(rng.choice(_FRAGMENTS) for _ in range(rng.randrange(4)))
        chunks.append(word)
    chunks.extend(rng.choice(_FRAGMENTS) for _ in range(3))
    return "".join(chunks), words


@pytest.mark.parametrize("seed", range(300))
def test_hostile_inputs_lose_no_words(seed: int) -> None:
    """For any Markdown soup every word shows up, parts fit, and entities sit inside their text."""
    rng = random.Random(seed)
    markdown, words = _hostile(rng, rng.randrange(1, 60))
    limit = rng.choice([4096, 300, 64, 16])
    parts = render(markdown, limit=limit)
    _check(parts, limit)
    visible = _visible(parts)
    missing = [w for w in words if w not in visible]
    assert not missing, (markdown, parts)
    plain = plain_parts(markdown, limit=limit)
    assert all(0 < utf16_len(p) <= limit for p in plain)
    assert re.sub(r"\s", "", "".join(plain)) == re.sub(r"\s", "", markdown)
