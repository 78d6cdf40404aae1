"""Blocking a person from the console: audited in the block's transaction, CSRF-protected;
a blocked Telegram user gets the bot's not-allowed answer from a bot running on the same
store (the model never called), a blocked API user's turn is refused with 403, and
unblocking lets them back (SQLite and PostgreSQL for the console, SQLite for the bot)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.admin_harness import Console, console_settings, running_console
from tests.bot_harness import ask_private, started_bot
from tests.store_contract import StoreKind

NOT_ALLOWED = "Sorry, this bot is not available here."


@pytest.fixture
async def console(kind: StoreKind, database: str) -> AsyncIterator[Console]:
    async with running_console(console_settings(kind, database, api_enabled=True)) as c:
        yield c


async def block(console: Console, person: str, blocked: str, csrf: str | None) -> int:
    data = {"blocked": blocked} | ({} if csrf is None else {"csrf": csrf})
    answer = await console.client.post(
        f"/admin/people/{person}/block", data=data, allow_redirects=False
    )
    return answer.status


async def test_blocking_and_unblocking_are_audited_and_need_the_csrf_token(
    console: Console,
) -> None:
    person = "api:u-1"
    assert await console.sign_in() == 303
    csrf = await console.csrf(f"/admin/people/{person}")
    assert await block(console, person, "yes", None) == 403
    assert await block(console, person, "yes", "0" * len(csrf)) == 403
    for forged in ("", "maybe", "YES", "y" * 1000):
        assert await block(console, person, forged, csrf) == 400
    assert not await console.store.is_blocked(person)
    assert await block(console, person, "yes", csrf) == 303
    assert await block(console, person, "yes", csrf) == 303  # already: nothing logged
    assert await console.store.is_blocked(person)
    status, html = await console.page(f"/admin/people/{person}")
    assert status == 200 and "Blocked:" in html
    answer = await console.client.post("/api/chat", json={"message": "Hi", "userId": "u-1"})
    assert answer.status == 403
    assert (await answer.json())["code"] == "FORBIDDEN"
    assert await block(console, person, "no", csrf) == 303
    assert not await console.store.is_blocked(person)
    assert not await console.engine.blocks.blocked(person)  # this worker's cache dropped
    entries = await console.store.audit_log(before_id=None, limit=10)
    assert [(e.action, e.target) for e in entries if e.action != "sign_in"] == [
        ("unblock", person),
        ("block", person),
    ]


async def test_a_blocked_person_gets_the_not_allowed_answer_from_the_bot(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """The console and the bot share one SQLite file; the blocked user is answered as one
    not on the allow-list, the model not called; another user is answered as before."""
    from tests.store_contract import STORE_KINDS

    sqlite = STORE_KINDS[0]
    address = await sqlite.new_database(tmp_path)
    async with running_console(console_settings(sqlite, address)) as console:
        assert await console.sign_in() == 303
        csrf = await console.csrf("/admin/people/tg:501")
        assert await block(console, "tg:501", "yes", csrf) == 303
        async with started_bot(Path(address), bot_api, model_server) as bot:
            assert await ask_private(bot, 501, "Pick a database") == [NOT_ALLOWED]
            assert model_server.requests == []
            model_server.enqueue("Which load?")
            assert "Which load?" in (await ask_private(bot, 502, "Pick a database"))[0]
