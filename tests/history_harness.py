"""Helpers for the history and export tests: finishing a consultation through the
running bot, pressing a button and reading its popup, and the files the bot uploaded."""

from __future__ import annotations

import io
from typing import Any

from docx import Document as open_document

from fakes.bot_api import Call, Upload
from tests.bot_harness import RunningBot, ask_private, sent

FINAL_MARKDOWN = """## Итог

Выбирайте **PostgreSQL**, если нужны транзакции.

- надёжность
- расширения

| База | Когда |
|---|---|
| SQLite | один процесс |
| PostgreSQL | много воркеров |

```python
print("привет")
```

Источники: https://www.postgresql.org/docs/
"""
"""A final answer with each kind of formatting: heading, bold, list, table, code."""


async def finish(
    bot: RunningBot,
    chat_id: int,
    request: str,
    answer: str,
    *,
    question: str = "Which load do you expect?",
    final: str = FINAL_MARKDOWN,
    chunk_size: int = 64,
    **kwargs: Any,
) -> int:
    """A two-round consultation to its final answer (the bot's rounds are 2); the final
    answer's message id."""
    bot.model.enqueue(question)
    await ask_private(bot, chat_id, request, **kwargs)
    bot.model.enqueue(final, chunk_size=chunk_size)
    await ask_private(bot, chat_id, answer, **kwargs)
    return int(sent(bot, chat_id)[-1].result["message_id"])


async def pressed(
    bot: RunningBot, chat_id: int, data: str, message_id: int, language_code: str = "en"
) -> Call:
    """Press a button under `message_id` (from a client set to `language_code`); the bot's
    answer to that press."""
    update = bot.api.push_update(
        bot.api.callback_query(chat_id, chat_id, data, message_id, language_code)
    )
    query_id = update["callback_query"]["id"]
    return await bot.api.wait_for(
        lambda c: c.method == "answerCallbackQuery" and c.params["callback_query_id"] == query_id
    )


def popup(answer: Call) -> str:
    return str(answer.params.get("text") or "")


def uploads(bot: RunningBot, chat_id: int) -> list[Upload]:
    """The documents the chat was sent, in order."""
    return [
        c.params["document"]
        for c in bot.api.calls_of("sendDocument")
        if str(c.params.get("chat_id")) == str(chat_id) and c.status == 200
    ]


async def wait_uploads(bot: RunningBot, chat_id: int, count: int) -> list[Upload]:
    """Wait until the chat was sent `count` documents in all; return them."""
    await bot.api.wait_for(
        lambda c: (
            c.method == "sendDocument"
            and c.result is not None
            and str(c.params.get("chat_id")) == str(chat_id)
        ),
        20.0,  # the first document loads python-docx
        count=count,
    )
    return uploads(bot, chat_id)


def docx_text(upload: Upload) -> tuple[list[tuple[str, str]], list[list[str]]]:
    """The DOCX's paragraphs as (style name, text) and its tables' rows of cell texts."""
    document = open_document(io.BytesIO(upload.data))
    paragraphs = [(_style(p), p.text) for p in document.paragraphs]
    tables = [[[cell.text for cell in row.cells] for row in t.rows] for t in document.tables]
    return paragraphs, tables


def monospace_texts(upload: Upload) -> list[str]:
    """Texts of the runs set in a monospace font (code)."""
    document = open_document(io.BytesIO(upload.data))
    return [r.text for p in document.paragraphs for r in p.runs if r.font.name == "Courier New"]


def _style(paragraph: Any) -> str:
    style = paragraph.style
    return "" if style is None else str(style.name)
