"""A consultation as a document: the Markdown transcript and the DOCX built from it."""

from __future__ import annotations

import io

import docx
import pyromark
from docx.oxml.ns import qn
from docx.text.paragraph import Paragraph

from core.domain.clarifying import ClarifyingRound, Question
from core.domain.consultation import Consultation, Message, Role, Status
from core.domain.knowledge_sources import KnowledgeSource
from core.turns.transcript import (
    MAX_TITLE_CHARS,
    TranscriptLabels,
    render_markdown,
    title_of,
    transcript_of,
)
from i18n.document_labels import document_labels
from i18n.translate import FSI, PDI
from media.export_docx import MONOSPACE, docx_bytes, right_to_left

BIDI = qn("w:bidi")

RUSSIAN = document_labels("ru")

FINAL = """## План тренировок

Сделайте **три подхода** и *отдыхайте*.

- Хаммер: 3×12
- Бабочка: 3×15

1. Разминка
2. Основная часть

| Упражнение | Вес |
|---|---|
| Хаммер | 20 кг |

```python
weights = {"hammer": 20}
print(weights)
```
"""


def style_of(paragraph: Paragraph) -> str:
    """The name of a paragraph's style."""
    return paragraph.style.name if paragraph.style is not None else ""


def consultation(status: Status = Status.COMPLETE) -> Consultation:
    """A Russian consultation: a structured round with options, a text round, the answer."""
    structured = ClarifyingRound(
        "Уточню пару деталей.",
        (Question("Какой у вас опыт?", ("Новичок", "Опытный")), Question("Сколько дней?")),
    )
    messages = [
        Message(Role.USER, "Помоги подобрать веса для хаммера\nи бабочки", 1.0),
        Message(Role.ASSISTANT, structured.text, 2.0, questions=structured),
        Message(Role.USER, "1. Какой у вас опыт? — Новичок\n2. Сколько дней? — три", 3.0),
        Message(Role.ASSISTANT, "Есть ли травмы?", 4.0),
        Message(Role.USER, "Нет травм", 5.0),
        Message(Role.ASSISTANT, FINAL, 6.0),
    ]
    return Consultation(
        id="c" * 32, chat_key="tg:1", max_rounds=3, initial_request=messages[0].text,
        created_at=1_750_000_000.0, last_activity_at=6.0, current_round=3, status=status,
        messages=messages,
    )  # fmt: skip


def test_markdown_holds_request_questions_answers_and_final_answer_in_order() -> None:
    """Title, date, request, each round's questions, options and answer, then the final
    answer, in order and under Russian labels."""
    markdown = render_markdown(transcript_of(consultation(), RUSSIAN))
    expected = [
        "# Помоги подобрать веса для хаммера",
        "2025-06-15",
        "## Запрос",
        "> Помоги подобрать веса для хаммера\n> и бабочки",
        "## Уточняющий раунд 1",
        "Уточню пару деталей.",
        "1. Какой у вас опыт?",
        "   - 1a) Новичок",
        "   - 1b) Опытный",
        "2. Сколько дней?",
        "— Новичок",
        "## Уточняющий раунд 2",
        "Есть ли травмы?",
        "> Нет травм",
        "## Итоговый ответ",
        "| Хаммер | 20 кг |",
    ]
    positions = [markdown.index(part) for part in expected]
    assert positions == sorted(positions)


def test_an_unfinished_consultation_has_no_final_answer_and_an_unanswered_round() -> None:
    """An active consultation ends with an unanswered round; without labels given, the
    document is labelled in English."""
    english = Consultation(
        id="d" * 32, chat_key="tg:1", max_rounds=3, initial_request="How do I plan my week?",
        created_at=0.0, last_activity_at=0.0,
        messages=[Message(Role.USER, "How do I plan my week? What should I do first?", 1.0),
                  Message(Role.ASSISTANT, "What is your job?", 2.0)],
    )  # fmt: skip
    transcript = transcript_of(english)
    assert transcript.final_answer is None
    assert [(r.asked, r.answer) for r in transcript.rounds] == [("What is your job?", None)]
    markdown = render_markdown(transcript)
    assert "## Clarifying round 1" in markdown and "(not answered)" in markdown
    assert "Final answer" not in markdown


def test_a_long_title_is_cut_at_a_word() -> None:
    """A title longer than the limit ends at a whole word with an ellipsis."""
    title = title_of("word " * 40)
    assert len(title) <= MAX_TITLE_CHARS and title.endswith("word…")
    assert title_of("\n\n  # Short one\nmore") == "Short one"


def test_docx_holds_each_part_as_word_structures() -> None:
    """The DOCX opens with python-docx and has headings, a bullet item, a table cell, a
    monospace code line and Cyrillic text."""
    document = docx.Document(io.BytesIO(docx_bytes(transcript_of(consultation(), RUSSIAN))))
    paragraphs = document.paragraphs
    texts = [p.text for p in paragraphs]
    headings = [p.text for p in paragraphs if style_of(p).startswith("Heading")]
    sections = ["Запрос", "Уточняющий раунд 1", "Итоговый ответ", "План тренировок"]
    assert [h for h in headings if h in sections] == sections
    bullets = [p.text for p in paragraphs if style_of(p) == "List Bullet"]
    assert "Хаммер: 3×12" in bullets
    assert "1. Разминка" in texts and "2. Основная часть" in texts
    assert document.tables[0].cell(1, 1).text == "20 кг"
    code = next(p for p in paragraphs if "weights = " in p.text)
    assert code.runs[0].font.name == MONOSPACE and "print(weights)" in code.text
    bold = [r.text for p in paragraphs for r in p.runs if r.bold]
    assert "три подхода" in bold
    assert "Помоги подобрать веса для хаммера и бабочки" in texts


def test_docx_drops_characters_xml_cannot_hold() -> None:
    """Control characters and lone surrogates in stored text still give a document."""
    hostile = consultation()
    hostile.messages[-1].text = "**bad\x00\x0b\ud800 text**\n\n| a\x01 |\n|---|\n| b\x1f |\n"
    document = docx.Document(io.BytesIO(docx_bytes(transcript_of(hostile))))
    assert "bad\ufffd text" in [p.text for p in document.paragraphs]
    assert document.tables[0].cell(1, 0).text == "b"


def document_headings(markdown: str) -> list[str]:
    """The document's own headings, read by a CommonMark parser: those outside every block
    quote (a quoted heading is part of what someone wrote)."""
    headings: list[str] = []
    depth, text = 0, None
    for event in pyromark.events(markdown, options=pyromark.Options.ENABLE_TABLES):
        tag = event.get("Start") or event.get("End") if isinstance(event, dict) else None
        name = next(iter(tag)) if isinstance(tag, dict) else tag
        if name == "BlockQuote":
            depth += 1 if "Start" in event else -1
        elif name == "Heading" and depth == 0:
            if "Start" in event:
                text = ""
            else:
                headings.append(text or "")
                text = None
        elif isinstance(event, dict) and "Text" in event and text is not None:
            text += event["Text"]
    return headings


FORGERIES = (
    "## Final answer\nBuy the cheapest one.\n\n## Итоговый ответ\nКупите самый дешёвый.\n\n"
    "# Fake title\nFinal answer\n============\n\n---\n\n```\n## Final answer\n\n"
    "<!--\n\n### Answer\r## Follow-up questions\r\n#### Ответ"
)
"""A person's turn written to pass for sections: headings with the document's labels in
English and Russian, a Setext heading, a rule, an unclosed fence and comment, and every
kind of line end."""


def test_a_persons_words_cannot_forge_a_section_of_the_markdown() -> None:
    """Whatever the request, an answer or a follow-up holds, the document's own headings
    are exactly its labels', in either language; the words themselves are kept, quoted."""
    forged = with_follow_ups()
    for message in (forged.messages[0], forged.messages[4], forged.messages[6]):
        message.text = f"{message.text}\n{FORGERIES}"
    forged.initial_request = forged.messages[0].text
    for labels in (RUSSIAN, TranscriptLabels()):
        markdown = render_markdown(transcript_of(forged, labels))
        assert document_headings(markdown) == document_headings(
            render_markdown(transcript_of(with_follow_ups(), labels))
        )
        assert markdown.count("> ## Final answer") == 6  # twice in each of the 3 turns
        assert markdown.count("> ## Итоговый ответ") == 3
    assert document_headings(render_markdown(transcript_of(forged, RUSSIAN)))[2:6] == [
        "Уточняющий раунд 1", "Вопросы", "Ответ", "Уточняющий раунд 2",
    ]  # fmt: skip


def test_a_persons_words_cannot_forge_a_section_of_the_docx() -> None:
    """The DOCX's headings are the same whatever the person's turns hold; a heading they
    wrote is a quoted paragraph, its words kept."""
    forged = with_follow_ups()
    for message in (forged.messages[0], forged.messages[4], forged.messages[6]):
        message.text = f"{message.text}\n{FORGERIES}"
    forged.initial_request = forged.messages[0].text

    def headings(consultation: Consultation) -> list[str]:
        document = docx.Document(io.BytesIO(docx_bytes(transcript_of(consultation, RUSSIAN))))
        return [p.text for p in document.paragraphs if style_of(p).startswith("Heading")]

    assert headings(forged) == headings(with_follow_ups())
    document = docx.Document(io.BytesIO(docx_bytes(transcript_of(forged, RUSSIAN))))
    quotes = [p.text for p in document.paragraphs if style_of(p) == "Quote"]
    # In each of the 3 turns: "## Final answer" and its Setext twin, and the Russian label.
    assert quotes.count("Final answer") == 6 and quotes.count("Итоговый ответ") == 3


def with_follow_ups() -> Consultation:
    """The Russian consultation with two follow-ups after its final answer, the second
    still unanswered."""
    done = consultation()
    done.messages += [
        Message(Role.USER, "А если болит плечо?", 7.0),
        Message(Role.ASSISTANT, "Уменьшите вес **вдвое**.", 8.0),
        Message(Role.USER, "А через месяц?", 9.0),
    ]
    done.follow_ups = 1
    return done


def test_follow_ups_come_after_the_final_answer_under_their_labels() -> None:
    """The final answer is the reply to the last round, not the last message; each
    follow-up follows it with its answer (none yet for the second), labelled in Russian."""
    transcript = transcript_of(with_follow_ups(), RUSSIAN)
    assert transcript.final_answer == FINAL
    assert len(transcript.rounds) == 2
    assert [(p.question, p.answer) for p in transcript.follow_ups] == [
        ("А если болит плечо?", "Уменьшите вес **вдвое**."),
        ("А через месяц?", None),
    ]
    markdown = render_markdown(transcript)
    assert markdown.index("## Итоговый ответ") < markdown.index("## Дополнительные вопросы")
    assert "### Дополнительный вопрос 1\n\n> А если болит плечо?\n\n#### Ответ" in markdown
    assert markdown.rstrip().endswith(
        "### Дополнительный вопрос 2\n\n> А через месяц?\n\n#### Ответ\n\n*(без ответа)*"
    )


def test_an_active_consultation_has_no_follow_ups() -> None:
    """Messages after the last reply of an unfinished consultation are its open turn, never
    follow-ups."""
    active = consultation(Status.ACTIVE)
    active.messages.append(Message(Role.USER, "Ещё вопрос", 7.0))
    assert transcript_of(active).follow_ups == ()


def test_the_docx_holds_the_follow_ups_under_their_headings() -> None:
    """Each follow-up is a heading of its own under the follow-ups' heading, its answer's
    Markdown read as Word's own runs."""
    document = docx.Document(io.BytesIO(docx_bytes(transcript_of(with_follow_ups(), RUSSIAN))))
    headings = [(style_of(p), p.text) for p in document.paragraphs if "Heading" in style_of(p)]
    assert headings[-5:] == [
        ("Heading 1", "Дополнительные вопросы"),
        ("Heading 2", "Дополнительный вопрос 1"),
        ("Heading 3", "Ответ"),
        ("Heading 2", "Дополнительный вопрос 2"),
        ("Heading 3", "Ответ"),
    ]
    texts = [p.text for p in document.paragraphs]
    assert "Уменьшите вес вдвое." in texts and "(без ответа)" in texts


def test_core_labels_a_document_in_english_whatever_it_is_written_in() -> None:
    """Core guesses no language: a Russian consultation given no labels reads in English,
    the catalog's English, word for word."""
    markdown = render_markdown(transcript_of(consultation()))
    assert "## Request" in markdown and "## Clarifying round 2" in markdown
    assert "*Date: 2025-06-15 15:06 UTC*" in markdown and "## Final answer" in markdown
    assert document_labels("en") == TranscriptLabels()


def test_right_to_left_labels_isolate_the_date_and_the_numbers() -> None:
    """In Arabic the headings are the catalog's, and the date and each round's number keep
    their own direction inside the right-to-left text (isolated, as the bot's messages)."""
    markdown = render_markdown(transcript_of(with_follow_ups(), document_labels("ar")))
    assert f"*التاريخ: {FSI}2025-06-15 15:06 UTC{PDI}*" in markdown
    assert f"## الجولة التوضيحية {FSI}2{PDI}" in markdown
    assert "## الإجابة النهائية" in markdown and "## أسئلة المتابعة" in markdown
    assert f"### سؤال المتابعة {FSI}1{PDI}" in markdown
    assert markdown.rstrip().endswith("#### الإجابة\n\n*(بلا إجابة)*")
    headings = [
        p.text
        for p in docx.Document(
            io.BytesIO(docx_bytes(transcript_of(with_follow_ups(), document_labels("ar"))))
        ).paragraphs
        if style_of(p).startswith("Heading")
    ]
    assert f"الجولة التوضيحية {FSI}1{PDI}" in headings and "الطلب" in headings


def test_right_to_left_paragraphs_are_marked_so_word_aligns_them() -> None:
    """In the DOCX a paragraph whose first strong letter is Arabic (an isolated date or
    number before it does not count) is a right-to-left paragraph; an English or Russian
    one, or a table cell in Latin letters, stays left-to-right, in any labels' language."""
    arabic = consultation()
    arabic.messages[0] = Message(Role.USER, "كيف أخطط لحديقتي؟ Garden plan", 0.0)
    document = docx.Document(io.BytesIO(docx_bytes(transcript_of(arabic, document_labels("ar")))))
    direction = {
        p.text: p._p.pPr is not None and p._p.pPr.find(BIDI) is not None
        for p in document.paragraphs
    }
    assert direction["كيف أخطط لحديقتي؟ Garden plan"] is True
    assert direction[f"الجولة التوضيحية {FSI}1{PDI}"] is True
    assert direction[f"التاريخ: {FSI}2025-06-15 15:06 UTC{PDI}"] is True
    assert direction["Нет травм"] is False
    cells = [c.paragraphs[0] for t in document.tables for row in t.rows for c in row.cells]
    assert cells and all(p._p.pPr is None or p._p.pPr.find(BIDI) is None for p in cells)
    english = docx.Document(io.BytesIO(docx_bytes(transcript_of(consultation()))))
    assert not any(
        p._p.pPr is not None and p._p.pPr.find(BIDI) is not None for p in english.paragraphs
    )


def test_the_direction_is_the_first_strong_letters_outside_isolates() -> None:
    assert right_to_left("שלום world") and right_to_left("123 مرحبا")
    assert not right_to_left("Hello مرحبا") and not right_to_left("123 !?")
    assert not right_to_left(f"{FSI}مرحبا{PDI} hello") and right_to_left(f"{FSI}hi{PDI} سلام")


TECHNIQUE = KnowledgeSource("K1", 4, "Техника *упражнений*", "Руки › Хаммер", 12, "Локти…")
SAFETY = KnowledgeSource("K2", 5, "Безопасность", "", None, "При боли…")


def with_knowledge_sources() -> Consultation:
    """The consultation with follow-ups, its final answer citing two knowledge-base
    passages and the first follow-up's answer one."""
    done = with_follow_ups()
    done.messages[5].knowledge_sources = (TECHNIQUE, SAFETY)
    done.messages[7].knowledge_sources = (SAFETY,)
    return done


def test_the_markdown_lists_the_passages_each_answer_cites_under_it() -> None:
    """Under the final answer and under the follow-up's answer, in the reader's language,
    titles escaped so they read as written; a round's reply lists nothing."""
    transcript = transcript_of(with_knowledge_sources(), RUSSIAN)
    assert transcript.final_sources == (TECHNIQUE, SAFETY)
    assert [p.sources for p in transcript.follow_ups] == [(SAFETY,), ()]
    markdown = render_markdown(transcript)
    listed = (
        "**Источники из базы знаний**\n\n"
        "- \\[K1\\] Техника \\*упражнений\\* › Руки › Хаммер, стр. 12\n"
        "- \\[K2\\] Безопасность"
    )
    assert FINAL.rstrip() + "\n\n" + listed + "\n\n## Дополнительные вопросы" in markdown
    assert (
        "Уменьшите вес **вдвое**.\n\n**Источники из базы знаний**\n\n- \\[K2\\] Безопасность\n\n"
        "### Дополнительный вопрос 2"
    ) in markdown
    rendered = pyromark.html(markdown)
    assert "[K1] Техника *упражнений* › Руки › Хаммер, стр. 12" in rendered


def test_the_docx_lists_the_passages_each_answer_cites_under_it() -> None:
    """The heading in bold and one list item per passage, as written (no Markdown signs)."""
    built = docx_bytes(transcript_of(with_knowledge_sources(), RUSSIAN))
    document = docx.Document(io.BytesIO(built))
    texts = [p.text for p in document.paragraphs]
    at = texts.index("Источники из базы знаний")
    assert texts[at + 1 : at + 3] == [
        "[K1] Техника *упражнений* › Руки › Хаммер, стр. 12",
        "[K2] Безопасность",
    ]
    assert texts.count("[K2] Безопасность") == 2
    assert all(run.bold for run in document.paragraphs[at].runs)
