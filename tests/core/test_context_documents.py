"""Documents in the context window: the original request's documents keep an allowance of
their own in every round, later documents give way to their names before anything the
user typed does, and the omission note says so."""

from __future__ import annotations

import pytest

from core.domain.attachments import DocumentText, MessageInput, document_block
from core.domain.consultation import Message
from core.prompting.context import MIN_KEPT_CHARS, build_model_messages
from core.prompting.prompts import PromptLibrary
from tests.core.test_context import SYSTEM, assert_alternates, assistant, user

LIBRARY = PromptLibrary()
BUDGET = 6000
ALLOWANCE = 10_000


def build(history: list[Message], *, allowance: int | None = ALLOWANCE) -> list[dict[str, str]]:
    return build_model_messages(
        SYSTEM,
        history,
        is_group=False,
        budget_chars=BUDGET,
        omission_note=LIBRARY.omission_note,
        excerpt_note=LIBRARY.excerpt_note,
        documents_budget_chars=allowance,
    ).messages


def contract(chars: int) -> DocumentText:
    """A document whose every line is numbered, so any cut shows."""
    lines, size, n = [], 0, 0
    while size < chars:
        lines.append(f"clause {n}: the tenant pays on the first day of the month.")
        size += len(lines[-1]) + 1
        n += 1
    return DocumentText("lease.pdf", "\n".join(lines)[:chars])


REQUEST = MessageInput(words="Is this lease fair to me?", documents=(contract(8000),))


def rounds_after(
    request: MessageInput, answers: list[str], reply_chars: int = 1500
) -> list[Message]:
    """The request, then one long reply and one user answer per entry of `answers`."""
    history = [user(request.stored_text)]
    for n, answer in enumerate(answers):
        history += [assistant(f"Question {n}: " + "x" * reply_chars), user(answer)]
    return history


def test_the_requests_document_is_whole_in_place_on_top_of_the_history_budget() -> None:
    """A document longer than the whole history budget is sent whole in round 1, where it
    was in the stored turn, and the conversation is not trimmed for it."""
    messages = build([user(REQUEST.stored_text)])

    assert messages[1]["content"] == REQUEST.stored_text
    assert messages[0]["content"] == SYSTEM  # no omission note: nothing given up


def test_the_requests_document_stays_whole_in_every_round() -> None:
    """Rounds later, with the history over its budget, the document is still whole in the
    first message, and what gives way is the model's older replies."""
    answers = [f"Answer {n}: I rent in Berlin, two rooms." for n in range(5)]
    history = rounds_after(REQUEST, answers)

    messages = build(history)

    block = document_block(REQUEST.documents[0])
    assert messages[1]["content"].count(block) == 1
    assert messages[1]["content"].startswith("Is this lease fair to me?")
    sent = "\n".join(m["content"] for m in messages)
    assert all(answer in sent for answer in answers)  # every answer the user gave
    assert "trimmed to fit" in messages[0]["content"]
    assert sum(len(m["content"]) for m in messages) - len(block) <= BUDGET
    assert_alternates(messages)


def test_without_an_allowance_the_document_counts_against_the_history() -> None:
    """The allowance is what keeps it: counted against the history budget, the same
    document is cut to its beginning and end."""
    messages = build([user(REQUEST.stored_text)], allowance=None)

    assert len(messages[1]["content"]) <= BUDGET
    assert "characters left out here" in messages[1]["content"]


def test_documents_over_their_allowance_keep_their_beginning_and_end() -> None:
    """Documents over the allowance together are cut to a common share, each keeping its
    name, beginning and end; the note counts them as shortened."""
    big = DocumentText("lease.pdf", contract(9000).text)
    annex = DocumentText("annex.txt", "Annex: " + "the deposit is three months. " * 300)
    request = MessageInput(words="Is this fair?", documents=(big, annex))

    messages = build([user(request.stored_text)], allowance=ALLOWANCE)

    first = messages[1]["content"]
    assert first.startswith("Is this fair?")
    for document in (big, annex):
        head = f'<document name="{document.name}">\n{document.text[:200]}'
        assert head in first
        assert first.count(document.text[-200:] + "\n</document>") == 1
    assert first.count("characters left out here") == 2
    assert len(first) < ALLOWANCE + 1000
    assert "2 long messages are shortened" in messages[0]["content"]


def test_later_documents_give_way_to_their_names_before_any_typed_text() -> None:
    """A document sent in round 2 is shown by name once the history is over its budget,
    before any of the user's typed answers is shortened or left out; the latest message
    keeps its own document."""
    letter = DocumentText("letter.txt", contract(3000).text)
    later = MessageInput(words="Here is the landlord's letter.", documents=(letter,))
    latest = MessageInput(
        words="And the new offer:", documents=(DocumentText("offer.txt", "Rent +5%."),)
    )
    history = rounds_after(
        REQUEST,
        ["I rent in Berlin.", later.stored_text, "Two rooms, since 2019.", latest.stored_text],
    )

    messages = build(history)

    sent = "\n".join(m["content"] for m in messages)
    assert '[document "letter.txt" attached]' in sent
    assert '<document name="letter.txt">' not in sent
    assert "Here is the landlord's letter." in sent
    for typed in ("I rent in Berlin.", "Two rooms, since 2019.", "And the new offer:"):
        assert typed in sent
    assert latest.stored_text in sent  # the latest message keeps its document
    assert document_block(REQUEST.documents[0]) in messages[1]["content"]
    note = messages[0]["content"]
    assert "1 documents the user attached to earlier messages are shown by name only" in note
    assert_alternates(messages)


def test_a_later_document_is_kept_while_shortening_replies_is_enough() -> None:
    """Naming a document is not the first resort: if shortening the model's older replies
    makes room, the later document stays whole."""
    letter = MessageInput(
        words="The letter:", documents=(DocumentText("letter.txt", "Dear tenant, " * 60),)
    )
    history = rounds_after(REQUEST, [letter.stored_text, "Fine."], reply_chars=2400)

    messages = build(history)

    sent = "\n".join(m["content"] for m in messages)
    assert letter.stored_text in sent
    assert "shown by name only" not in messages[0]["content"]
    assert len(min((m["content"] for m in messages[2::2]), key=len)) >= MIN_KEPT_CHARS


@pytest.mark.parametrize(
    ("name", "omitted_chars"),
    [("lease.pdf", 0), ("lease.pdf", 250_000), ("signed " * 30 + "lease.pdf", 0)],
    ids=["plain", "cut-by-its-reader", "long-name"],
)
def test_a_requests_document_exactly_at_its_allowance_is_sent_whole(
    name: str, omitted_chars: int
) -> None:
    """The allowance counts the document's text: text of exactly that many characters is
    sent whole, in place, with no excerpt and no omission note, whatever its name and
    though its reader noted a cut of its own."""
    text = contract(ALLOWANCE).text
    assert len(text) == ALLOWANCE
    request = MessageInput(
        words="Is this lease fair to me?",
        documents=(DocumentText(name, text, omitted_chars),),
    )

    messages = build([user(request.stored_text)])

    assert messages[1]["content"] == request.stored_text
    assert messages[0]["content"] == SYSTEM
