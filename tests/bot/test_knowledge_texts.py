"""What an operator reads of /knowledge fits one Telegram message: whole lines and
passages while they fit, then how many were left out; long titles and texts are cut."""

from __future__ import annotations

from bot.commands.knowledge_texts import (
    TITLE_CHARS,
    documents_text,
    fit,
    passages_text,
    removed_text,
    utf16_length,
)
from bot.transport.render import TELEGRAM_LIMIT
from core.domain.knowledge import KnowledgeDocument, Passage


def document(number: int, title: str = "Price list", role: str | None = None) -> KnowledgeDocument:
    return KnowledgeDocument(number, title, f"upload:{number}.md", role, "h", 3, 0.0)


def test_fit_keeps_whole_blocks_and_counts_the_rest() -> None:
    text = fit("head", ["a" * 40, "b" * 40, "c" * 40], lambda n: f"+{n}", limit=100)
    assert text == "head\n" + "a" * 40 + "\n" + "b" * 40 + "\n+1"
    assert fit("head", ["a", "b"], lambda n: f"+{n}", limit=100) == "head\na\nb"


def test_a_long_list_is_cut_to_one_message_with_how_many_more() -> None:
    """Three thousand documents with long, astral titles: one message within Telegram's
    limit in UTF-16 units, every kept line whole, and the count of the rest."""
    documents = [document(n, "📘 " + "manual " * 60) for n in range(1, 3001)]
    text = documents_text("en", documents)
    assert utf16_length(text) <= TELEGRAM_LIMIT
    lines = text.splitlines()
    assert lines[0] == "Documents in the knowledge base: 3000"
    kept = lines[1:-1]
    assert all(line.startswith(f"#{n} 📘 manual") for n, line in enumerate(kept, start=1))
    assert all(len(line) < TITLE_CHARS + 80 for line in kept)
    assert lines[-1] == f"…and {3000 - len(kept)} more"


def test_a_short_list_is_whole() -> None:
    text = documents_text("en", [document(1), document(2, "Terms\nof sale", "lawyer")])
    assert text.splitlines() == [
        "Documents in the knowledge base: 2",
        "#1 Price list · passages: 3 · added 1970-01-01 00:00 UTC",
        "#2 Terms of sale · role lawyer · passages: 3 · added 1970-01-01 00:00 UTC",
    ]


def test_passages_are_labelled_placed_and_cut() -> None:
    passages = [
        Passage(n, 7, "Manual", "Kettles", n if n % 2 else None, "word " * 400, 1.0 / n)
        for n in range(1, 13)
    ]
    text = passages_text("en", passages)
    assert utf16_length(text) <= TELEGRAM_LIMIT
    blocks = text.split("\n\n")
    assert blocks[0] == "What a consultation would receive, best first:"
    assert blocks[1].startswith("[K1] Manual › Kettles, page 1 (document #7, score 1.000)\nword")
    assert blocks[2].startswith("[K2] Manual › Kettles (document #7, score 0.500)\nword")
    assert blocks[1].endswith("…")
    assert blocks[-1].startswith("…and ")


def test_removed_says_which_ids_were_there() -> None:
    assert removed_text("en", [3, 9], [3]) == "Removed: #3.\nNo such document: #9."
    assert removed_text("en", [9], []) == "No such document: #9."
    assert removed_text("en", [3], [3]) == "Removed: #3."
