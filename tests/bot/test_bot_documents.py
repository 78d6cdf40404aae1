"""Documents in Telegram end to end: the file is downloaded from the fake Bot API, its
text read (plain text, a PDF made with fpdf2, a DOCX made with python-docx) and sent to
the model inside a block naming it, after the caption; what cannot be read is refused
with the reason, nothing stored."""

from __future__ import annotations

import io
from pathlib import Path

import docx
from fpdf import FPDF
from pypdf import PdfWriter

from fakes.bot_api import STREAM_CHUNK, FakeBotApi
from fakes.bot_files import UNANNOUNCED
from fakes.model_server import FakeModelServer
from tests.bot_harness import (
    ALICE,
    BOB,
    GROUP,
    RunningBot,
    ask_private,
    conversation,
    group_answer,
    post_in_group,
    started_bot,
)

USER = 702
SUPPORTED = "text, Markdown, CSV, JSON, source code, PDF, DOCX"


def pdf_bytes(*lines: str) -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    for line in lines:
        pdf.cell(text=line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def docx_bytes() -> bytes:
    document = docx.Document()
    document.add_paragraph("Quarterly budget")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "Rent"
    table.rows[0].cells[1].text = "1200"
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def file_calls(bot: RunningBot) -> list[str]:
    return [c.method for c in bot.api.calls if c.method in ("getFile", "download")]


async def test_a_text_file_with_a_caption_is_context_for_the_question(bot: RunningBot) -> None:
    media = bot.api.document(b"line one\nline two\n", "notes.txt", "text/plain")
    [reply] = await ask_private(bot, USER, None, media=media, caption="Summarise this")
    assert reply.endswith("Round 1 of 3")
    assert conversation(bot.model.requests[0]) == [
        'Summarise this\n\n<document name="notes.txt">\nline one\nline two\n</document>'
    ]


async def test_a_pdf_is_read_for_its_text(bot: RunningBot) -> None:
    media = bot.api.document(pdf_bytes("Invoice 42", "Total: 99 EUR"), "invoice.pdf", None)
    await ask_private(bot, USER, None, media=media, caption="Is this right?")
    [content] = conversation(bot.model.requests[0])
    assert content.startswith('Is this right?\n\n<document name="invoice.pdf">\n')
    assert "Invoice 42" in content and "Total: 99 EUR" in content
    assert content.endswith("\n</document>")


async def test_a_docx_without_caption_is_the_whole_message(bot: RunningBot) -> None:
    """Paragraphs and table cells in order; no caption, so the document is all there is."""
    mime = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    media = bot.api.document(docx_bytes(), "budget.docx", mime)
    await ask_private(bot, USER, None, media=media)
    [content] = conversation(bot.model.requests[0])
    assert content.startswith('<document name="budget.docx">\nQuarterly budget')
    assert content.index("Rent") < content.index("1200")


async def test_a_long_document_is_cut_and_the_user_told_once(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    text = "".join(f"Line {i} of the long report.\n" for i in range(200)).encode()
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, max_document_chars=500
    ) as bot:
        media = bot.api.document(text, "report.txt", "text/plain")
        note, reply = await ask_private(bot, USER, None, media=media, parts=2)
        assert note == (
            "Your document is longer than I can read at once, so I used its first 500 characters."
        )
        assert reply.endswith("Round 1 of 3")
        [content] = conversation(bot.model.requests[0])
        assert "Line 0 of the long report." in content and "Line 199" not in content
        assert "more characters of this document were cut]" in content


async def test_an_archive_is_refused_naming_what_can_be_read(bot: RunningBot) -> None:
    media = bot.api.document(b"PK\x03\x04" + bytes(60), "photos.zip", "application/zip")
    [text] = await ask_private(bot, USER, None, media=media, caption="What is in here?")
    assert text == (
        f"I can't read this kind of file. Documents I can read: {SUPPORTED}. You can also "
        "paste the text into a message."
    )
    assert file_calls(bot) == [] and bot.model.requests == []  # its name said enough
    [status] = await ask_private(bot, USER, "/status")
    assert status.startswith("No active consultation.")


async def test_a_document_over_the_limit_is_refused_before_download(bot: RunningBot) -> None:
    media = bot.api.document(b"x", "huge.txt", "text/plain", size=11_000_000)
    [text] = await ask_private(bot, USER, None, media=media, language_code="ru")
    assert text == "Файл слишком большой: я принимаю файлы до 10 МБ."
    assert file_calls(bot) == [] and bot.model.requests == []


async def test_telegrams_own_limit_is_said_when_the_bots_is_higher(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """getFile answers "file is too big" over 20 MB: the user hears Telegram's limit."""
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, max_document_bytes=50_000_000
    ) as bot:
        media = bot.api.document(b"x", "dump.txt", "text/plain", size=30_000_000)
        [text] = await ask_private(bot, USER, None, media=media)
        assert text == "This file is too large: I can take files up to 20 MB."
        assert file_calls(bot) == ["getFile"] and bot.model.requests == []


async def test_a_document_without_a_size_stops_downloading_past_the_limit(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A document whose message says no file_size, with a body far over the limit: the
    download stops just past the limit (the rest is never sent), the user gets the size
    refusal, and nothing is stored or asked."""
    limit = 100_000
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, max_document_bytes=limit
    ) as bot:
        body = b"a line of text that goes on and on\n" * 150_000  # 5.25 MB
        media = bot.api.document(body, "dump.txt", "text/plain", size=UNANNOUNCED)
        assert "file_size" not in media["document"]

        [text] = await ask_private(bot, USER, None, media=media)

        assert text == "This file is too large: I can take files up to 100 KB."
        [sent] = bot.api.sent.values()
        assert limit < sent <= limit + 16 * STREAM_CHUNK  # what was in flight, not 5 MB
        assert bot.model.requests == []
        status = await bot.runtime.engine.turns.status(f"tg:{USER}")
        assert not status.active


async def test_a_document_without_a_size_within_the_limit_is_read(bot: RunningBot) -> None:
    """Without a file_size, a body within the limit is downloaded whole and read."""
    body = b"chunked line\n" * 2000
    media = bot.api.document(body, "notes.txt", "text/plain", size=UNANNOUNCED)
    [reply] = await ask_private(bot, USER, None, media=media, caption="Count the lines")
    assert "Round 1 of 3" in reply
    assert "chunked line" in conversation(bot.model.requests[0])[0]
    assert list(bot.api.sent.values()) == [len(body)]


async def test_a_password_protected_pdf_is_unreadable(bot: RunningBot) -> None:
    writer = PdfWriter(clone_from=io.BytesIO(pdf_bytes("Secret plans")))
    writer.encrypt("hunter2")
    buffer = io.BytesIO()
    writer.write(buffer)
    media = bot.api.document(buffer.getvalue(), "secret.pdf", "application/pdf")
    [text] = await ask_private(bot, USER, None, media=media)
    assert text.startswith("I couldn't open this file")
    assert bot.model.requests == []


async def test_in_a_group_a_mention_replying_to_a_document_reads_it(bot: RunningBot) -> None:
    """Bob's document alone is ignored (not downloaded); Alice's mention replying to it
    makes it the input, her words the question."""
    document = await bot.send(
        GROUP,
        None,
        user_id=BOB,
        chat_type="supergroup",
        media=bot.api.document(b"Meeting at 10 in room 4\n", "agenda.txt", "text/plain"),
    )
    await post_in_group(
        bot,
        "@consult_bot when is the meeting?",
        user=ALICE,
        reply_to_message=document["message_id"],
    )
    await group_answer(bot, 1)
    assert file_calls(bot) == ["getFile", "download"]
    assert conversation(bot.model.requests[0]) == [
        'Alice: when is the meeting?\n\n<document name="agenda.txt">\n'
        "Meeting at 10 in room 4\n</document>"
    ]
