"""The knowledge-base passages an answer cites, listed under it in Telegram: the real PTB
Application against the fake Bot API, the real openai SDK against the fake model server, a
real SQLite file, and a listed knowledge search. Under the final answer and a follow-up's,
in the person's language, after a restart from /history's "Answer N", and in /export."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from bot.commands.history import SHOW
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot.test_bot_sources import entity_texts
from tests.bot_harness import (
    RunningBot,
    ask_private,
    bot_settings,
    buttons,
    running_bot,
    sent,
    wait_sent,
)
from tests.history_harness import finish, pressed, wait_uploads
from tests.knowledge_search import ListedKnowledge, passage

USER = 6161
KNOWLEDGE = ListedKnowledge(
    [
        passage(
            1,
            "Kettles carry a two-year warranty.",
            title="Warranty *terms*",
            section="Kettles",
            page=3,
        ),
        passage(2, "Descale the kettle monthly.", title="Care guide"),
        passage(3, "The kettle filter can be rinsed.", title="Care guide", section="Filter"),
    ]
)
FINAL = "Covered for two years [K1]; descale monthly [K2, K9]."
LISTED = "Sources from the knowledge base\n[K1] Warranty *terms* › Kettles, page 3\n[K2] Care guide"


@contextlib.asynccontextmanager
async def kettle_bot(
    db: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> AsyncIterator[RunningBot]:
    settings = bot_settings(db, bot_api, model_server, default_max_rounds=2)
    async with running_bot(settings, bot_api, model_server, knowledge=KNOWLEDGE) as bot:
        yield bot


async def test_a_final_answer_lists_the_passages_it_cites(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Cited K1 and K2 listed under a bold heading, titles as written, the page named;
    K3 (not cited) and K9 (no such passage) are not; the status line stays last; the
    question round before it lists nothing."""
    async with kettle_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        await finish(bot, USER, "Is my kettle under warranty?", "Bought in May", final=FINAL)
        round_text, final_text = sent(bot, USER)[-2].params["text"], sent(bot, USER)[-1].params
    assert "knowledge base" not in round_text
    text = final_text["text"]
    assert text.startswith(FINAL + "\n\n" + LISTED + "\n\nFinal answer\n")
    assert ("bold", "Sources from the knowledge base", None) in entity_texts(final_text)
    assert "K3" not in text and "[K9]" not in text.split("\n\n", 1)[1]


async def test_a_follow_ups_answer_lists_its_own_in_the_persons_language(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """A follow-up answered in Russian lists what it cites under the Russian heading,
    with the page in Russian."""
    async with kettle_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as bot:
        await finish(bot, USER, "Kettle warranty?", "May", final="Yes [K1].", language_code="ru")
        final_id = int(sent(bot, USER)[-1].result["message_id"])
        model_server.enqueue("Гарантия два года [K1].")
        await bot.send(USER, "А фильтр?", reply_to_message=final_id, language_code="ru")
        texts = await wait_sent(bot, USER, len(sent(bot, USER)) + 1)
    assert "\n\nИсточники из базы знаний\n[K1] Warranty *terms* › Kettles, стр. 3\n\n" in texts[-1]


async def test_history_and_export_list_them_after_a_restart(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The sources are stored with the answer: a new Application on the same file shows
    them under "Answer N" as they were first sent, and the exported files list them."""
    db = tmp_path / "bot.sqlite3"
    async with kettle_bot(db, bot_api, model_server) as first:
        await finish(first, USER, "Is my kettle under warranty?", "Bought in May", final=FINAL)
        original = sent(first, USER)[-1].params["text"]
    async with kettle_bot(db, bot_api, model_server) as second:
        await ask_private(second, USER, "/history")
        listing = sent(second, USER)[-1]
        [show] = [d for d in buttons(listing) if d.startswith(f"{SHOW}:")]
        count = len(sent(second, USER))
        await pressed(second, USER, show, int(listing.result["message_id"]))
        again = (await wait_sent(second, USER, count + 1))[-1]
        await ask_private(second, USER, "/export 1", parts=0)
        docx, markdown = await wait_uploads(second, USER, 2)
    assert again == original and LISTED in again
    exported = markdown.data.decode()
    assert (
        "**Sources from the knowledge base**\n\n"
        "- \\[K1\\] Warranty \\*terms\\* › Kettles, page 3\n"
        "- \\[K2\\] Care guide"
    ) in exported
    assert docx.filename.endswith(".docx")
