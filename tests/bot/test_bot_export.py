"""/export, /export N and the "Document" button, end to end: the real Application, the fake
Bot API (which keeps the uploaded files' bytes), the fake model and a SQLite file. The
DOCX is opened with python-docx and read part by part."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.transport.keyboards import EXPORT
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from i18n.translate import FSI, PDI
from tests.bot_harness import RunningBot, ask_private, buttons, press, sent, started_bot
from tests.history_harness import (
    docx_text,
    finish,
    monospace_texts,
    popup,
    pressed,
    uploads,
    wait_uploads,
)

USER = 701
OTHER = 702
REQUEST = "Какую базу данных выбрать для бота?\nНужна надёжность."


# Consultations take two rounds.
pytestmark = pytest.mark.bot_settings(default_max_rounds=2)


async def test_the_document_button_sends_the_consultation_as_docx_and_markdown(
    bot: RunningBot,
) -> None:
    """The "Document" button under a Russian final answer sends two replies, a DOCX and
    a Markdown file named from the title, while the chat shows "sending a file": each
    holds the title, the date, the request, the round's question and answer, and the final
    answer with its heading, list, table, code and sources, labelled in Russian, the
    language of the person who pressed it."""
    final_id = await finish(
        bot, USER, REQUEST, "Около тысячи пользователей", question="Какая нагрузка?",
        language_code="ru",
    )  # fmt: skip
    [data] = [d for d in buttons(sent(bot, USER)[-1]) if d.startswith(f"{EXPORT}:")]
    requests_before = len(bot.model.requests)

    answer = await pressed(bot, USER, data, final_id, language_code="ru")
    docx, markdown = await wait_uploads(bot, USER, 2)

    assert popup(answer) == ""
    title = "Какую базу данных выбрать для бота"
    assert (docx.filename, markdown.filename) == (f"{title}.docx", f"{title}.md")
    assert all(len(u.filename) <= 64 for u in (docx, markdown))
    action = bot.api.calls_of("sendChatAction")[-1]
    assert action.params["action"] == "upload_document"
    assert bot.api.calls.index(action) < bot.api.calls.index(bot.api.calls_of("sendDocument")[0])
    for call in bot.api.calls_of("sendDocument"):
        assert call.params["reply_parameters"]["message_id"] == final_id
    paragraphs, tables = docx_text(docx)
    texts = [text for _, text in paragraphs]
    styled = {text: style for style, text in paragraphs}
    assert styled[f"{title}?"] == "Title"
    assert any(text.startswith("Дата: ") and text.endswith(" UTC") for text in texts)
    for heading in ("Запрос", "Уточняющий раунд 1", "Вопросы", "Ответ", "Итоговый ответ"):
        assert styled[heading].startswith("Heading"), heading
    assert "Какую базу данных выбрать для бота? Нужна надёжность." in texts
    assert "Какая нагрузка?" in texts and "Около тысячи пользователей" in texts
    assert styled["Итог"].startswith("Heading")
    assert "Выбирайте PostgreSQL, если нужны транзакции." in texts
    assert styled["надёжность"] == styled["расширения"] == "List Bullet"
    assert tables == [
        [["База", "Когда"], ["SQLite", "один процесс"], ["PostgreSQL", "много воркеров"]]
    ]
    assert 'print("привет")' in monospace_texts(docx)
    assert any("https://www.postgresql.org/docs/" in text for text in texts)
    md = markdown.data.decode()
    for part in (
        f"# {title}?",
        "## Запрос",
        "## Уточняющий раунд 1",
        "Какая нагрузка?",
        "Около тысячи пользователей",
        "## Итоговый ответ",
        "| SQLite | один процесс |",
        'print("привет")',
    ):
        assert part in md, part
    assert md.index("## Запрос") < md.index("## Уточняющий раунд 1") < md.index("## Итоговый ответ")
    assert len(bot.model.requests) == requests_before


async def test_export_sends_the_latest_and_export_n_the_one_history_numbers(
    bot: RunningBot,
) -> None:
    """/export sends the newest consultation (an active one too); /export N the one
    /history shows as N; a number past the history names the valid range."""
    await finish(bot, USER, "Plan a trip to Rome", "In May")
    await ask_private(bot, USER, "Choose a laptop for editing")  # active, round 1 answered

    await ask_private(bot, USER, "/export", parts=0)
    latest = await wait_uploads(bot, USER, 2)
    await ask_private(bot, USER, "/export 2", parts=0)
    older = (await wait_uploads(bot, USER, 4))[2:]
    [refusal] = await ask_private(bot, USER, "/export 3")

    assert [u.filename for u in latest] == [
        "Choose a laptop for editing.docx",
        "Choose a laptop for editing.md",
    ]
    assert "Final answer" not in latest[1].data.decode()
    assert [u.filename for u in older] == ["Plan a trip to Rome.docx", "Plan a trip to Rome.md"]
    assert "## Final answer" in older[1].data.decode()
    assert refusal == "There is no consultation number 3. Choose one from 1 to 2 (see /history)."


LABELLED = {
    "es": ("Fecha: ", "Solicitud", "Ronda de aclaración 1", "Preguntas", "Respuesta",
           "Respuesta final"),
    "ar": ("التاريخ: ", "الطلب", f"الجولة التوضيحية {FSI}1{PDI}", "الأسئلة", "الإجابة",
           "الإجابة النهائية"),
    "ja": ("日付：", "ご依頼", "確認ラウンド 1", "質問", "回答", "最終回答"),
}  # fmt: skip
"""Per interface language: how the date line starts, then the headings in order."""


@pytest.mark.parametrize("language", sorted(LABELLED))
async def test_the_document_is_labelled_in_the_persons_interface_language(
    bot: RunningBot, language: str
) -> None:
    """A person whose Telegram speaks Spanish, Arabic or Japanese gets both files labelled
    in that language, as the bot's messages to them are, though the consultation is written
    in Russian; in Arabic the date and the round's number are isolated, so they keep their
    direction in right-to-left text."""
    await finish(bot, USER, REQUEST, "Около тысячи пользователей", language_code=language)
    await ask_private(bot, USER, "/export", parts=0, language_code=language)
    docx, markdown = await wait_uploads(bot, USER, 2)

    date, *headings = LABELLED[language]
    md = markdown.data.decode()
    positions = [md.index(f"\n## {heading}\n") for heading in headings[:2]]
    positions.append(md.index(f"\n## {headings[-1]}\n"))
    assert positions == sorted(positions)
    assert f"### {headings[2]}" in md and f"### {headings[3]}" in md
    assert f"*{date}" in md and "Запрос" not in md and "Request" not in md
    if language == "ar":
        assert f"*{date}{FSI}20" in md and f" UTC{PDI}*" in md
    paragraphs, _ = docx_text(docx)
    styled = {text: style for style, text in paragraphs}
    for heading in headings:
        assert styled[heading].startswith("Heading"), heading
    assert any(text.startswith(date) for _, text in paragraphs)


async def test_a_chosen_language_labels_the_document_whatever_the_client_says(
    bot: RunningBot,
) -> None:
    """Japanese chosen with /language labels the document in Japanese for a client set to
    English, the "Document" button's files too."""
    await ask_private(bot, USER, "/language", language_code="en")
    await press(bot, USER, "lang:ja", sent(bot, USER)[-1].result["message_id"])
    final_id = await finish(bot, USER, "Plan a trip to Rome", "In May", language_code="en")
    [data] = [d for d in buttons(sent(bot, USER)[-1]) if d.startswith(f"{EXPORT}:")]

    await pressed(bot, USER, data, final_id)
    _, markdown = await wait_uploads(bot, USER, 2)

    md = markdown.data.decode()
    assert "## ご依頼" in md and "## 確認ラウンド 1" in md and "## 最終回答" in md
    assert "Final answer" not in md


@pytest.mark.parametrize("argument", ["0", "-1", "abc", "12345", "1 2", "1.5", "٣"])
async def test_a_malformed_number_gets_the_usage_and_sends_nothing(
    bot: RunningBot, argument: str
) -> None:
    """/export with anything but one history number explains the command; nothing is read
    or sent, and the model is not called."""
    await finish(bot, USER, "Plan a trip to Rome", "In May")
    requests_before = len(bot.model.requests)
    [text] = await ask_private(bot, USER, f"/export {argument}")
    assert text.startswith("Send /export for your latest consultation")
    assert uploads(bot, USER) == []
    assert len(bot.model.requests) == requests_before


async def test_nothing_to_export_is_said_clearly(bot: RunningBot) -> None:
    """A chat without consultations is told so, in its language, for /export and /export 1."""
    [plain] = await ask_private(bot, USER, "/export")
    [numbered] = await ask_private(bot, USER, "/export 1", language_code="ru")
    assert plain.startswith("There is nothing to export yet.")
    assert numbered.startswith("Пока нечего выгружать.")
    assert bot.api.calls_of("sendDocument") == []


async def test_another_chats_or_a_forged_document_button_exports_nothing(
    bot: RunningBot,
) -> None:
    """A "Document" press naming another chat's consultation is told "no longer kept" in
    its popup, like a consultation that is gone, and sends nothing; forged data (wrong
    shape, oversized) is answered without text. Nothing is sent to either chat."""
    final_id = await finish(bot, USER, "Plan a trip to Rome", "In May")
    [data] = [d for d in buttons(sent(bot, USER)[-1]) if d.startswith(f"{EXPORT}:")]
    bare = data.partition(":")[2]
    await ask_private(bot, OTHER, "/help")
    other_message = int(sent(bot, OTHER)[-1].result["message_id"])

    stolen = await pressed(bot, OTHER, data, other_message)
    forged = [
        await pressed(bot, USER, value, final_id)
        for value in (
            f"{EXPORT}:{bare.upper()}",
            f"{EXPORT}:{bare}0",
            f"{EXPORT}:{bare[:-1]}",
            f"{EXPORT}:../{bare}",
            f"{EXPORT}:" + "f" * 32,
            f"{EXPORT}:{bare}" + "x" * 40,
            f"{EXPORT}:",
        )
    ]

    assert popup(stolen) == "This consultation is no longer kept."
    assert [popup(a) for a in forged[:-3]] == [""] * 4
    assert popup(forged[-3]) == "This consultation is no longer kept."  # well formed, unknown
    assert [popup(a) for a in forged[-2:]] == ["", ""]
    assert bot.api.calls_of("sendDocument") == []
    assert bot.api.calls_of("sendChatAction") == []


async def test_a_hundred_thousand_character_answer_exports_whole(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A final answer of 100,000 characters (stored whole) is in both files in full."""
    lines = [f"Строка {n}: ответ с **жирным** текстом, номер {n * 7}.\n\n" for n in range(2500)]
    long_answer = "".join(lines)[:100_000]
    async with started_bot(
        tmp_path / "bot.sqlite3",
        bot_api,
        model_server,
        default_max_rounds=2,
        max_answer_chars=120_000,
    ) as bot:
        await finish(bot, USER, "A long answer", "Yes", final=long_answer, chunk_size=4096)
        await ask_private(bot, USER, "/export", parts=0)
        docx, markdown = await wait_uploads(bot, USER, 2)

    paragraphs, _ = docx_text(docx)
    body = [text for _, text in paragraphs if text.startswith("Строка ")]
    assert len(body) == long_answer.count("Строка ") > 1500
    assert body[-1] in long_answer.replace("**", "")
    assert markdown.data.decode().count("Строка ") == len(body)
