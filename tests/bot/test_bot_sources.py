"""Sources of a search-backed provider (Perplexity's `citations`, `search_results`) shown under
the reply: the real PTB Application against the fake Bot API (which applies Telegram's length
and entity checks), the real openai SDK against the fake model server, a real SQLite file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakes.bot_api import FakeBotApi
from fakes.bot_api_checks import utf16_len
from fakes.model_server import FakeModelServer
from tests.bot_harness import ask_private, button_kinds, sent, started_bot

USER = 5151
CITATIONS = [
    "https://www.who.int/sleep",
    "https://example.org/a?b=1",
    "ftp://files.example/x",
    "https://www.who.int/sleep",
]
SEARCH_RESULTS = [
    {"title": "Sleep *facts* — [WHO](x) <b>", "url": "https://www.who.int/sleep"},
    {"title": "Example", "url": "https://example.org/a?b=1", "date": "2024-01-01"},
]
EXTRAS = {"citations": CITATIONS, "search_results": SEARCH_RESULTS}


def entity_texts(call_params: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(type, covered text, url) of each entity of a sent message (UTF-16 offsets)."""
    data = call_params["text"].encode("utf-16-le")
    out = []
    for entity in call_params.get("entities") or []:
        start, end = 2 * entity["offset"], 2 * (entity["offset"] + entity["length"])
        out.append((entity["type"], data[start:end].decode("utf-16-le"), entity.get("url")))
    return out


async def test_a_final_answer_lists_its_sources_as_links(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Numbered as the answer cites them, titles shown literally, only http(s) linked, a
    repeated URL listed once; the status line stays last."""
    model_server.enqueue("Adults need 7-9 hours [1][4]. More in [2] and [3].", extras=EXTRAS)
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, default_max_rounds=1
    ) as bot:
        [text] = await ask_private(bot, USER, "How much sleep do adults need?")
        params = sent(bot, USER)[-1].params
    assert text == (
        "Adults need 7-9 hours [1][4]. More in [2] and [3].\n\n"
        "Sources\n"
        "[1] Sleep *facts* — [WHO](x) <b>\n"
        "[2] Example\n"
        "[3] ftp://files.example/x\n\n"
        "Final answer\n✅ Consultation complete. To ask about this answer, reply to it or press "
        "“Ask a follow-up”; any other message starts a new consultation."
    )
    entities = entity_texts(params)
    assert ("bold", "Sources", None) in entities
    links = [(covered, url) for kind, covered, url in entities if kind == "text_link"]
    assert links == [
        ("Sleep *facts* — [WHO](x) <b>", "https://www.who.int/sleep"),
        ("Example", "https://example.org/a?b=1"),
    ]


async def test_a_question_round_shows_its_sources_in_russian(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Any reply with sources lists them, under a heading in the user's language; the
    button stays under the last part."""
    model_server.enqueue(
        "Сколько вам лет? [1]", extras={"citations": ["https://www.who.int/sleep"]}
    )
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        [text] = await ask_private(bot, USER, "Сколько нужно спать?", language_code="ru")
        last = sent(bot, USER)[-1]
    assert "\n\nИсточники\n[1] www.who.int/sleep\n\nРаунд 1 из 3" in text
    assert button_kinds(last) == ["qf"]
    links = [url for kind, _, url in entity_texts(last.params) if kind == "text_link"]
    assert links == ["https://www.who.int/sleep"]


async def test_sources_that_do_not_fit_go_into_their_own_message(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """An answer filling a message leaves the sources list a message of its own, whose
    entities are counted from its own start; every message passes Telegram's checks."""
    # About 4000 UTF-16 units: room for no list (numbered: one line repeated is a loop).
    answer = "".join(f"Пу{n:03d} 🙂 [1].\n" for n in range(290))
    titles = [
        {"title": f"Источник номер {n} 🙂" * 6, "url": f"https://s{n}.example/p"} for n in range(20)
    ]
    extras = {"search_results": titles}
    model_server.enqueue(answer, extras=extras)
    async with started_bot(
        tmp_path / "bot.sqlite3", bot_api, model_server, default_max_rounds=1
    ) as bot:
        texts = await ask_private(bot, USER, "Вопрос", language_code="ru", parts=2)
        calls = sent(bot, USER)[-2:]
    assert texts[0].rstrip().endswith("[1].")
    assert texts[1].startswith("Источники\n[1] Источник номер 0")
    assert all(utf16_len(text) <= 4096 for text in texts)
    links = [e for e in entity_texts(calls[1].params) if e[0] == "text_link"]
    assert len(links) == 20
    assert (
        links[19][1].startswith("Источник номер 19 🙂") and links[19][2] == "https://s19.example/p"
    )
    assert "Итоговый ответ" in texts[1]
