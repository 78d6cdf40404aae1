"""What an operator's /knowledge text or caption asks: only the documented forms ask
anything, every other text is None (the usage), whatever it holds."""

from __future__ import annotations

import pytest

from bot.commands.knowledge_forms import (
    MAX_IDS,
    AddDocument,
    ListDocuments,
    RemoveDocuments,
    SearchPassages,
    caption_asks,
    command_asks,
)


@pytest.mark.parametrize(
    ("text", "asked"),
    [
        ("/knowledge", ListDocuments()),
        ("/knowledge@consult_bot", ListDocuments()),
        ("/knowledge  LIST ", ListDocuments()),
        ("/knowledge remove 3", RemoveDocuments((3,))),
        ("/knowledge Remove 3 7 3", RemoveDocuments((3, 7))),
        ("/knowledge remove 007", RemoveDocuments((7,))),
        ("/knowledge search kettle warranty", SearchPassages("kettle warranty", None)),
        ("/knowledge search\nline one\nline two", SearchPassages("line one\nline two", None)),
        ("/knowledge search role=lawyer refunds?", SearchPassages("refunds?", "lawyer")),
        ("/knowledge search role=", SearchPassages("role=", None)),
    ],
)
def test_a_documented_form_asks_what_it_says(text: str, asked: object) -> None:
    assert command_asks(text) == asked


@pytest.mark.parametrize(
    "text",
    [
        "/knowledge list all",
        "/knowledge remove",
        "/knowledge remove abc",
        "/knowledge remove 1 abc",
        "/knowledge remove 0",
        "/knowledge remove -1",
        "/knowledge remove 1.5",
        "/knowledge remove " + "9" * 19,
        "/knowledge remove ١٢",  # digits of another script
        "/knowledge remove " + " ".join(["1"] * (MAX_IDS + 1)),
        "/knowledge search",
        "/knowledge search   ",
        "/knowledge search role=lawyer",
        "/knowledge add",
        "/knowledge " + "x" * 5000,
    ],
)
def test_any_other_form_asks_nothing(text: str) -> None:
    assert command_asks(text) is None


@pytest.mark.parametrize(
    ("caption", "asked"),
    [
        ("/knowledge", AddDocument(None)),
        ("/knowledge@consult_bot  ", AddDocument(None)),
        ("/knowledge role=lawyer", AddDocument("lawyer")),
        ("/knowledge role=lawyer extra", None),
        ("/knowledge lawyer", None),
        ("/knowledge role=", None),
        ("/knowledge role=" + "a" * 65, None),
        ("/knowledge role=../x", None),
        ("/knowledge title=Prices", None),
    ],
)
def test_a_caption_asks_to_add_its_document_with_a_role_at_most(
    caption: str, asked: AddDocument | None
) -> None:
    assert caption_asks(caption) == asked
