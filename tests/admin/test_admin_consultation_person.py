"""The person who asked, as the console shows a consultation, on a real server and store
(SQLite and PostgreSQL): recorded when an API session starts with a `userId`, with or
without client memory, linking to their page (with Block) and to the list of their
consultations; the Telegram user and the terminal recorded alike; nothing of them listed
once their consultation is deleted."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.domain.facts import ANONYMOUS_ADMIN_ID
from core.domain.listing import ConsultationQuery
from fakes.model_server import FakeModelServer
from tests.admin_harness import Console, console_settings, consultation, running_console
from tests.bot_harness import (
    ALICE,
    GROUP,
    RunningBot,
    ask_private,
    group_answer,
    mention,
    post_in_group,
)
from tests.store_contract import STORE_KINDS, StoreKind
from tests.terminal.test_console import console as terminal

JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def console(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> AsyncIterator[Console]:
    """The console beside the HTTP API, client memory off."""
    settings = console_settings(
        kind,
        database,
        api_enabled=True,
        memory_enabled=False,
        openai_base_url=model_server.base_url,
        llm_structured_questions="off",
    )
    async with running_console(settings) as c:
        yield c


async def ask(console: Console, message: str, **body: str) -> str:
    response = await console.client.post(
        "/api/chat", data=json.dumps({"message": message, **body}), headers=JSON
    )
    assert response.status == 200
    return str((await response.json())["sessionId"])


async def test_an_api_session_with_a_user_id_and_no_memory_names_them_and_leads_to_block(
    console: Console, model_server: FakeModelServer
) -> None:
    """Memory off, so the session has no memory owner: the person is the one recorded
    when it started, `api:u-8`, linked to their page (Block) and to their consultations."""
    model_server.enqueue("Rotate the keys.")
    model_server.enqueue("Nothing to add.")
    session = await ask(console, "Leak our keys?", userId="u-8")
    anonymous = await ask(console, "Who am I?")
    assert await console.sign_in() == 303
    status, html = await console.page(f"/admin/consultations/{session}")
    assert status == 200
    link = re.search(r'<dt>Person</dt><dd><a href="([^"]+)"><bdi>api:u-8</bdi></a>', html)
    assert link is not None and link.group(1) == "/admin/people/api%3Au-8"
    theirs = re.search(r'<a href="([^"]+)">their consultations</a>', html)
    assert theirs is not None and theirs.group(1) == "/admin/consultations?person=api%3Au-8"
    status, listed = await console.page(theirs.group(1))
    assert status == 200 and f"/admin/consultations/{session}" in listed
    assert f"/admin/consultations/{anonymous}" not in listed
    assert 'name="person" value="api:u-8"' in listed
    status, person = await console.page(link.group(1))
    assert status == 200 and '<button type="submit" class="danger">Block</button>' in person
    assert '<a href="/admin/consultations?person=api%3Au-8">Their consultations</a>' in person
    status, html = await console.page(f"/admin/consultations/{anonymous}")
    assert status == 200 and '<dt>Person</dt><dd><span class="empty">not recorded' in html
    assert "their consultations" not in html


async def test_a_deleted_session_leaves_nothing_listed_for_its_person(
    console: Console, model_server: FakeModelServer
) -> None:
    model_server.enqueue("Rotate the keys.")
    session = await ask(console, "Leak our keys?", userId="u-9")
    assert (await console.client.delete(f"/api/sessions/{session}")).status == 204
    assert await console.store.list_consultations(ConsultationQuery(person="api:u-9")) == []
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/consultations?person=api%3Au-9")
    assert status == 200 and "No consultation matches." in html


async def test_a_hostile_person_filter_is_refused_or_shown_inert(console: Console) -> None:
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/consultations?person=" + "a" * 201)
    assert status == 400 and "person: too long" in html
    hostile = "%22%3E%3Cscript%3Ex%3C/script%3E"  # "><script>x</script>
    status, html = await console.page(f"/admin/consultations?person={hostile}")
    assert status == 200 and "No consultation matches." in html
    assert "<script>x" not in html and 'value="&#34;&gt;&lt;script&gt;x' in html


async def test_a_telegram_user_is_recorded_in_private_and_in_a_group(bot: RunningBot) -> None:
    """Memory off (the bot harness's default): the person is still each Telegram user."""
    bot.model.enqueue("Which city?")
    bot.model.enqueue("How many people?")
    await ask_private(bot, 77, "Plan a trip")
    await post_in_group(bot, "@consult_bot plan a team trip", user=ALICE)
    await group_answer(bot, 1)
    store = bot.runtime.store
    private = await store.list_consultations(ConsultationQuery(person="tg:77"))
    group = await store.list_consultations(ConsultationQuery(person=f"tg:{ALICE}"))
    assert [row.chat_key for row in private] == ["tg:77"]
    assert [row.chat_key for row in group] == [f"tg:{GROUP}"]


async def test_an_anonymous_admin_is_no_person_on_the_consultations_page(
    tmp_path: Path,
) -> None:
    """Written as the group, through the one account every group's anonymous admins share:
    no person is recorded, and a row without one is not named after that account either
    (its Block would block every anonymous admin)."""
    sqlite = STORE_KINDS[0]
    async with running_console(console_settings(sqlite, await sqlite.new_database(tmp_path))) as c:
        found = consultation(chat_key="tg:-100123")
        found.started_by = ANONYMOUS_ADMIN_ID
        await c.store.create(found)
        assert await c.sign_in() == 303
        status, html = await c.page(f"/admin/consultations/{found.id}")
        assert status == 200 and '<dt>Person</dt><dd><span class="empty">not recorded' in html
        assert "GroupAnonymousBot" not in html and str(ANONYMOUS_ADMIN_ID) not in html


async def test_a_row_of_another_bot_names_its_person_in_that_bot(tmp_path: Path) -> None:
    """A row stored without a person, started by Telegram user 42 in bot 2's chat, is that
    bot's person `tg2:42`, linked to a working page (never bot 0's `tg:42`)."""
    sqlite = STORE_KINDS[0]
    async with running_console(console_settings(sqlite, await sqlite.new_database(tmp_path))) as c:
        found = consultation(chat_key="tg2:42")
        found.started_by = 42
        await c.store.create(found)
        assert await c.sign_in() == 303
        status, html = await c.page(f"/admin/consultations/{found.id}")
        link = re.search(r'<dt>Person</dt><dd><a href="([^"]+)"><bdi>tg2:42</bdi></a>', html)
        assert status == 200 and link is not None and link.group(1) == "/admin/people/tg2%3A42"
        status, person = await c.page(link.group(1))
        assert status == 200 and "tg2:42" in person


async def test_an_anonymous_admins_group_consultation_records_no_person(bot: RunningBot) -> None:
    bot.model.enqueue("How many people?")
    update = bot.api.text_message(
        GROUP, "@consult_bot plan a team trip", user_id=ANONYMOUS_ADMIN_ID, chat_type="supergroup"
    )
    message = update["message"]
    message["from"] = {"id": ANONYMOUS_ADMIN_ID, "is_bot": True, "first_name": "Group"}
    message["sender_chat"] = message["chat"]
    message["entities"] = mention(message["text"])
    bot.api.push_update(update)
    await group_answer(bot, 1)
    active = await bot.runtime.store.load_active(f"tg:{GROUP}")
    assert active is not None and active.person is None


async def test_the_terminal_is_recorded_as_console_local(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    from storage.sqlite.store import SqliteStore

    model_server.enqueue("Which budget?")
    code, _ = await terminal(tmp_path, model_server, ["Help me choose a laptop", "/quit"])
    assert code == 0
    store = await SqliteStore.open(tmp_path / "console.sqlite3")
    try:
        listed = await store.list_consultations(ConsultationQuery(person="console:local"))
        assert [row.chat_key for row in listed] == ["console:local"]
    finally:
        await store.close()
