"""/knowledge in Telegram: an operator (ADMIN_USER_IDS) in a private chat sends a document
captioned /knowledge and it is stored, read by later consultations, listed, searched and
removed; anyone else, and everyone in a group, meets an unknown command, and nothing is
fetched or changed for them; hostile uploads (too large, forged names, unreadable files, a
caption with no document) and malformed commands change nothing.

The real bot (python-telegram-bot) runs against the fake Bot API and the fake model
server, on a SQLite file, with the knowledge base in that file (`app.serve_bot`'s
wiring: the runtime's store and document readers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.domain.knowledge import KnowledgeDocument
from fakes.bot_api import FakeBotApi
from fakes.bot_files import UNANNOUNCED
from fakes.model_server import FakeModelServer
from tests.bot_harness import (
    GROUP,
    RunningBot,
    ask_private,
    bot_settings,
    conversation,
    group_texts,
    post_in_group,
    running_bot,
    sent,
    system_prompt,
    wait_sent,
)
from tests.postgres import postgres_url  # noqa: F401 - a fixture

OPERATOR = 900
USER = 501
LIMIT = 5000
UNKNOWN = "I don't know that command. See /help."
WARRANTY = b"""# Warranty terms

Every appliance carries a warranty from the day of purchase.

## Kettles

Electric kettles are covered for 24 months. Limescale is not a defect.
"""
# Text before its first heading: titled by its file's name, not by a heading.
UNHEADED = WARRANTY.removeprefix(b"# Warranty terms\n\n")

pytestmark = pytest.mark.bot_settings(
    admin_user_ids=str(OPERATOR), knowledge_max_document_bytes=LIMIT, default_max_rounds=2
)


async def upload(
    bot: RunningBot,
    data: bytes,
    name: str | None,
    *,
    chat: int = OPERATOR,
    caption: str = "/knowledge",
    size: int | None = None,
    **kwargs: Any,
) -> str:
    """Send `data` as a document captioned `caption`; the one message it gets back."""
    media = bot.api.document(data, name, size=size)
    [reply] = await ask_private(bot, chat, None, media=media, caption=caption, **kwargs)
    return reply


async def say(bot: RunningBot, text: str, chat: int = OPERATOR) -> str:
    [reply] = await ask_private(bot, chat, text)
    return reply


async def documents(bot: RunningBot) -> list[KnowledgeDocument]:
    return await bot.runtime.store.knowledge.documents()


def fetched(bot: RunningBot) -> list[str]:
    """The file requests the bot made (getFile, and the downloads themselves)."""
    return [c.method for c in bot.api.calls if c.method in ("getFile", "download")]


async def test_an_uploaded_document_is_stored_and_read_by_a_later_consultation(
    bot: RunningBot,
) -> None:
    """The upload's reply names the new document; no model call and no consultation come
    of it; a person's consultation afterwards is sent the kettle passage and cites it."""
    reply = await upload(bot, WARRANTY, "warranty.md")
    assert reply == "Added #1 Warranty terms (warranty.md), passages: 2."
    [document] = await documents(bot)
    assert (document.source, document.role, document.chunks) == ("upload:warranty.md", None, 2)
    assert bot.model.requests == []
    assert (await say(bot, "/status")).startswith("No active consultation.")

    bot.model.enqueue("When did you buy it?")
    await ask_private(bot, USER, "Is my kettle still covered?")
    system = system_prompt(bot.model.requests[0])
    assert "[K1] Warranty terms › Kettles" in system
    assert "> Electric kettles are covered for 24 months." in system
    assert conversation(bot.model.requests[0]) == ["Is my kettle still covered?"]


async def test_the_same_file_again_is_unchanged_and_a_changed_one_replaces_it(
    bot: RunningBot,
) -> None:
    await upload(bot, WARRANTY, "warranty.md")
    assert await upload(bot, WARRANTY, "warranty.md") == (
        "Unchanged: #1 Warranty terms (warranty.md) is already in the knowledge base."
    )
    changed = WARRANTY.replace(b"24 months", b"36 months")
    assert await upload(bot, changed, "warranty.md") == (
        "Replaced #1 Warranty terms (warranty.md), passages: 2."
    )
    found = await bot.runtime.store.knowledge.search("kettles", role=None, limit=1)
    assert found is not None and "36 months" in found[0].text


async def test_a_role_in_the_caption_tags_the_document_and_an_unknown_role_is_refused(
    bot: RunningBot,
) -> None:
    """`role=lawyer` serves only the lawyer's consultations (the search as one of them
    finds it, the default expert's does not); a role the deployment lacks is named with
    the roles it has, before anything is fetched."""
    reply = await upload(bot, WARRANTY, "terms.md", caption="/knowledge role=lawyer")
    assert reply.splitlines() == [
        "Added #1 Warranty terms (terms.md), passages: 2.",
        "Only for consultations of the role lawyer.",
    ]
    assert [d.role for d in await documents(bot)] == ["lawyer"]
    refused = await upload(bot, WARRANTY, "other.md", caption="/knowledge role=pirate")
    assert refused.startswith("There is no role pirate. Roles: ")
    assert "lawyer" in refused and len(await documents(bot)) == 1

    as_lawyer = await say(bot, "/knowledge search role=lawyer kettles")
    assert "[K1] Warranty terms › Kettles (document #1, score " in as_lawyer
    as_expert = await say(bot, "/knowledge search kettles")
    assert as_expert == "No passage of the knowledge base matches."


async def test_list_search_and_remove(bot: RunningBot) -> None:
    """The list shows id, title, role, passages and when; the search what a consultation
    would receive, labelled; remove says which ids were there and which were not."""
    assert await say(bot, "/knowledge") == (
        "The knowledge base is empty. To add a document, send it as a file with the caption "
        "/knowledge."
    )
    await upload(bot, WARRANTY, "warranty.md")
    await upload(bot, b"Refunds take 14 days.", "refunds.txt", caption="/knowledge role=lawyer")
    listed = (await say(bot, "/knowledge list")).splitlines()
    assert listed[0] == "Documents in the knowledge base: 2"
    assert listed[1].startswith("#1 Warranty terms · passages: 2 · added ")
    assert listed[2].startswith("#2 refunds · role lawyer · passages: 1 · added ")
    assert all(line.endswith(" UTC") for line in listed[1:])

    found = (await say(bot, "/knowledge search How long are kettles covered?")).split("\n\n")
    assert found[0] == "What a consultation would receive, best first:"
    label, text = found[1].split("\n")
    assert label.startswith("[K1] Warranty terms › Kettles (document #1, score ")
    assert text == "Electric kettles are covered for 24 months. Limescale is not a defect."

    assert await say(bot, "/knowledge remove 1 9 1") == "Removed: #1.\nNo such document: #9."
    assert [d.id for d in await documents(bot)] == [2]
    assert bot.model.requests == []


async def test_malformed_commands_get_the_usage_and_change_nothing(bot: RunningBot) -> None:
    await upload(bot, WARRANTY, "warranty.md")
    for text in (
        "/knowledge remove abc",
        "/knowledge remove",
        "/knowledge remove 1 x",
        "/knowledge remove 0",
        "/knowledge remove 9999999999999999999999",
        "/knowledge remove -1",
        "/knowledge search",
        "/knowledge search role=lawyer",
        "/knowledge frobnicate",
        "/knowledge list all",
    ):
        reply = await say(bot, text)
        assert reply.startswith("/knowledge — the documents of the knowledge base\n"), text
        assert "Files: .md, .markdown, .txt, .html, .htm, .pdf, .docx, up to 5 KB." in reply
    assert len(await documents(bot)) == 1
    wrong = await upload(bot, WARRANTY, "again.md", caption="/knowledge lawyer")
    assert wrong.startswith("/knowledge — the documents")
    assert len(await documents(bot)) == 1 and fetched(bot) == ["getFile", "download"]


async def test_a_non_operator_meets_an_unknown_command(bot: RunningBot) -> None:
    """The command, its forms and a captioned document get exactly what `/nosuch` gets;
    the document is neither fetched nor stored nor made a consultation."""
    await upload(bot, WARRANTY, "warranty.md")
    [stored] = await documents(bot)
    assert await say(bot, "/nosuch", chat=USER) == UNKNOWN
    for text in ("/knowledge", "/knowledge remove 1", "/knowledge search kettles"):
        assert await say(bot, text, chat=USER) == UNKNOWN
    before = fetched(bot)
    assert await upload(bot, WARRANTY.replace(b"24", b"99"), "warranty.md", chat=USER) == UNKNOWN
    assert fetched(bot) == before
    assert await documents(bot) == [stored]
    found = await bot.runtime.store.knowledge.search("kettles", role=None, limit=1)
    assert found is not None and "24 months" in found[0].text
    assert bot.model.requests == []
    assert (await say(bot, "/status", chat=USER)).startswith("No active consultation.")


async def test_in_a_group_the_command_is_unknown_to_the_operator_too(bot: RunningBot) -> None:
    """Named or captioned in a group, /knowledge is refused as an unknown command (one
    refusal a minute, as every group refusal); a bare one may be another bot's: ignored."""
    await post_in_group(bot, "/knowledge", user=OPERATOR, addressed=None)
    await post_in_group(bot, "/knowledge@consult_bot", user=OPERATOR, addressed=None)
    await bot.api.wait_for(lambda c: c.method == "sendMessage" and c.params.get("chat_id") == GROUP)
    media = bot.api.document(WARRANTY, "warranty.md")
    await bot.send(
        GROUP,
        None,
        user_id=USER,
        chat_type="supergroup",
        media=media,
        caption="/knowledge@consult_bot",
    )
    await bot.api.wait_for(
        lambda c: c.method == "sendMessage" and c.params.get("chat_id") == GROUP, count=2
    )
    assert group_texts(bot) == [UNKNOWN, UNKNOWN]
    assert await documents(bot) == [] and fetched(bot) == [] and bot.model.requests == []


async def test_a_document_over_the_limit_is_refused_before_it_is_fetched(
    bot: RunningBot,
) -> None:
    reply = await upload(bot, b"x", "manual.pdf", size=LIMIT + 1)
    assert reply == "manual.pdf was not added: it is larger than 5 KB."
    assert fetched(bot) == [] and await documents(bot) == []


async def test_a_document_of_unannounced_size_is_cut_off_at_the_limit(bot: RunningBot) -> None:
    """No file_size in the message: the download stops past the limit, nothing is stored."""
    body = b"word " * (4 * LIMIT)
    reply = await upload(bot, body, "notes.txt", size=UNANNOUNCED)
    assert reply == "notes.txt was not added: it is larger than 5 KB."
    assert await documents(bot) == []
    [path] = [p for p in bot.api.sent if p.endswith(".txt")]
    assert bot.api.sent[path] < len(body)


async def test_a_forged_file_name_is_reduced_to_its_base_name(bot: RunningBot) -> None:
    reply = await upload(bot, UNHEADED, "../../etc/cron.d/warranty.md")
    assert reply == "Added #1 warranty (warranty.md), passages: 2."  # titled by the base name
    again = await upload(bot, UNHEADED, "C:\\Users\\op\\warranty.md")
    assert again.startswith("Unchanged: #1 warranty (warranty.md)")
    assert [d.source for d in await documents(bot)] == ["upload:warranty.md"]
    odd = await upload(bot, b"Refunds take 14 days.", "re\u202efunds\x00.txt")
    assert odd == "Added #2 refunds (refunds.txt), passages: 1."
    assert [d.source for d in await documents(bot)][1] == "upload:refunds.txt"


async def test_an_unreadable_or_foreign_file_is_refused_with_its_reason(bot: RunningBot) -> None:
    assert await upload(bot, b"%PDF-1.7 not a pdf at all", "broken.pdf") == (
        "broken.pdf was not added: it could not be opened (damaged or password-protected)."
    )
    assert await upload(bot, b"   \n  ", "blank.txt") == (
        "blank.txt was not added: there is no text in it (a scan without a text layer?)."
    )
    before = fetched(bot)
    assert await upload(bot, b"PK\x03\x04", "docs.zip") == (
        "docs.zip was not added: the knowledge base reads these files: "
        ".md, .markdown, .txt, .html, .htm, .pdf, .docx."
    )
    assert fetched(bot) == before  # its name said enough
    assert await documents(bot) == [] and bot.model.requests == []


async def test_a_caption_without_a_document_gets_the_usage(bot: RunningBot) -> None:
    """A video (no document) captioned /knowledge gets the usage; a photo is not a kind the
    knowledge base reads; neither is fetched nor becomes a consultation."""
    video = {
        "video": {
            "file_id": "vid1",
            "file_unique_id": "uv1",
            "width": 320,
            "height": 240,
            "duration": 3,
        }
    }
    [reply] = await ask_private(bot, OPERATOR, None, media=video, caption="/knowledge")
    assert reply.startswith("/knowledge — the documents of the knowledge base\n")
    photo = bot.api.photo(b"\xff\xd8\xff" + bytes(100))
    [reply] = await ask_private(bot, OPERATOR, None, media=photo, caption="/knowledge")
    assert reply.startswith("photo.jpg was not added: the knowledge base reads these files")
    assert fetched(bot) == [] and await documents(bot) == [] and bot.model.requests == []
    assert (await say(bot, "/status")).startswith("No active consultation.")


async def test_replies_follow_the_operators_language(bot: RunningBot) -> None:
    before = len(sent(bot, OPERATOR))
    media = bot.api.document(WARRANTY, "warranty.md")
    await bot.send(OPERATOR, None, media=media, caption="/knowledge", language_code="ru")
    [reply] = (await wait_sent(bot, OPERATOR, before + 1))[before:]
    assert reply == "Добавлен #1 Warranty terms (warranty.md), фрагментов: 2."
    [listed] = await ask_private(bot, OPERATOR, "/knowledge", language_code="ru")
    assert listed.startswith("Документов в базе знаний: 1\n#1 Warranty terms · фрагментов: 2")


async def test_upload_list_search_remove_on_postgresql(
    postgres_url: str,  # noqa: F811
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """The same on PostgreSQL (DATABASE_URL): the knowledge base in its tables, the same
    answers; a refused document leaves nothing there."""
    settings = bot_settings(
        tmp_path / "unused.sqlite3",
        bot_api,
        model_server,
        database_url=postgres_url,
        admin_user_ids=str(OPERATOR),
        knowledge_max_document_bytes=LIMIT,
    )
    async with running_bot(settings, bot_api, model_server) as bot:
        assert await upload(bot, WARRANTY, "warranty.md") == (
            "Added #1 Warranty terms (warranty.md), passages: 2."
        )
        assert await upload(bot, b"%PDF-1.7 broken", "broken.pdf") == (
            "broken.pdf was not added: it could not be opened (damaged or password-protected)."
        )
        listed = await say(bot, "/knowledge")
        assert listed.startswith(
            "Documents in the knowledge base: 1\n#1 Warranty terms · passages: 2"
        )
        found = await say(bot, "/knowledge search kettles")
        assert "[K1] Warranty terms › Kettles (document #1, score " in found
        assert await say(bot, "/knowledge remove 1 2") == "Removed: #1.\nNo such document: #2."
        assert await documents(bot) == []


@pytest.mark.bot_settings(admin_user_ids=str(OPERATOR), knowledge_max_document_bytes=50_000_000)
async def test_a_document_telegram_will_not_hand_out_is_refused_with_its_limit(
    bot: RunningBot,
) -> None:
    """Within the knowledge base's limit but over the cloud Bot API's 20 MB: getFile says
    "file is too big", and the reply names Telegram's limit; nothing is downloaded."""
    reply = await upload(bot, b"x", "manual.pdf", size=30_000_000)
    assert reply == "manual.pdf was not added: it is larger than 20 MB."
    assert fetched(bot) == ["getFile"] and await documents(bot) == []


async def test_a_document_that_cannot_be_fetched_is_said_so(bot: RunningBot) -> None:
    gone = {"document": {"file_id": "gone", "file_unique_id": "g1", "file_name": "terms.md"}}
    [reply] = await ask_private(bot, OPERATOR, None, media=gone, caption="/knowledge")
    assert reply == (
        "terms.md was not added: it could not be downloaded from Telegram. Please send it again."
    )
    assert await documents(bot) == []


@pytest.mark.bot_settings(admin_user_ids=str(OPERATOR), embedding_model="fake-embedding")
async def test_with_embeddings_an_upload_is_embedded_and_found_by_meaning(
    bot: RunningBot,
) -> None:
    """With EMBEDDING_MODEL the operator's upload goes through the runtime's loader and its
    embedder: a question sharing no word with the document ("teapot", "guarantee") is
    sent the kettle passage, which only its vector can find."""
    assert (await upload(bot, WARRANTY, "warranty.md")).startswith(
        "Added #1 Warranty terms (warranty.md)"
    )
    assert await bot.runtime.store.knowledge.search("teapot guarantee", role=None, limit=3) == []
    bot.model.enqueue("When did you buy it?")
    await ask_private(bot, USER, "My teapot: guarantee?")
    system = system_prompt(bot.model.requests[-1])
    assert "> Electric kettles are covered for 24 months." in system
