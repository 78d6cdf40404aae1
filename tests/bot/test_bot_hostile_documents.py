"""Hostile documents in Telegram end to end (files from `fakes.hostile_documents`): a file
that costs too much is refused in the user's language with nothing stored, one that is
too large to read whole is cut with a notice, and other chats are answered meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.bot_api import FakeBotApi
from fakes.hostile_documents import DOCX_MIME, costly_pages_pdf, million_cell_docx
from fakes.model_server import FakeModelServer
from tests.bot_harness import ask_private, conversation, sent, started_bot, wait_sent

TOO_COSTLY = (
    "This file takes too long or too much memory to read, so I stopped. Nothing was saved: "
    "please send a smaller or simpler copy, or paste the text into a message."
)
TOO_COSTLY_RU = (
    "Этот файл читается слишком долго или требует слишком много памяти, поэтому я "
    "остановился. Ничего не сохранено: пришлите файл поменьше или попроще либо вставьте "
    "текст в сообщение."
)
HOSTILE_CHATS = range(801, 807)
TEXT_CHAT = 811


@pytest.mark.timeout(120)
async def test_six_costly_pdfs_are_refused_while_a_text_file_in_another_chat_is_answered(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Two readers, a 3 s deadline: six PDFs of costly pages take turns and are refused;
    a .txt sent after them is answered before the last of them is refused."""
    async with started_bot(
        tmp_path / "bot.sqlite3",
        bot_api,
        model_server,
        document_readers=2,
        document_read_timeout_seconds=3,
    ) as bot:
        pdf = costly_pages_pdf()
        for chat in HOSTILE_CHATS:
            language = "ru" if chat == HOSTILE_CHATS[0] else "en"
            media = bot.api.document(pdf, f"pages-{chat}.pdf", "application/pdf")
            await bot.send(chat, None, media=media, language_code=language)
        media = bot.api.document(b"line one\nline two\n", "notes.txt", "text/plain")

        [reply] = await ask_private(bot, TEXT_CHAT, None, media=media, caption="Summarise")

        assert reply.endswith("Round 1 of 3")
        refused_by_then = [chat for chat in HOSTILE_CHATS if sent(bot, chat)]
        assert len(refused_by_then) < len(HOSTILE_CHATS)
        for chat in HOSTILE_CHATS:
            [text] = await wait_sent(bot, chat, 1, timeout=90)
            assert text == (TOO_COSTLY_RU if chat == HOSTILE_CHATS[0] else TOO_COSTLY)
        assert len(bot.model.requests) == 1  # the text file's round only
        [status] = await ask_private(bot, HOSTILE_CHATS[1], "/status")
        assert status.startswith("No active consultation.")


async def test_a_million_cell_docx_is_read_in_part_and_the_user_told(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, max_document_chars=2000
    ) as bot:
        media = bot.api.document(million_cell_docx(), "cells.docx", DOCX_MIME)

        note, reply = await ask_private(bot, 821, None, media=media, parts=2)

        assert note == (
            "Your document is too large to read whole, so I used only its beginning (at most "
            "2000 characters)."
        )
        assert reply.endswith("Round 1 of 3")
        [content] = conversation(bot.model.requests[0])
        assert content.startswith('<document name="cells.docx">\n |  | ')
        assert content.endswith(
            "[… the rest of this document was cut: it is longer than could be read]\n</document>"
        )
