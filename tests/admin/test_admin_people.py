"""The console's people pages on a real server and store (SQLite and PostgreSQL): the
list with usage against limits, search and pages; a person's page; setting a quota
override and deleting memory through the forms, each audited and CSRF-protected;
forged and oversized person keys; markup in a key and in a fact shown inert; a stored bot's
people against that bot's limits."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.domain.bots import BotLimits, BotProfile, NewBot
from core.domain.consultation import Usage
from core.domain.facts import telegram_person
from core.domain.people import PeopleQuery
from core.domain.quotas import MAX_OVERRIDE_TOKENS, QuotaOverride
from core.domain.tool_usage import ToolCalls
from core.domain.tools import ToolFailure, ToolUse
from core.domain.usage import Accounting, CallKind, Charge, Payer, ScopeKind, day_of, month_start
from fakes.model_server import FakeModelServer
from tests.admin_harness import Console, console_settings, consultation, running_console
from tests.store_contract import STORE_KINDS, StoreKind

HOSTILE_FACT = "<script>alert('fact')</script> likes \u202eevil"
HOSTILE_PERSON = "api:<b>x</b>"


@pytest.fixture
async def console(kind: StoreKind, database: str) -> AsyncIterator[Console]:
    settings = console_settings(
        kind, database, user_daily_token_limit=5000, quota_exempt_user_ids=frozenset({9})
    )
    async with running_console(settings) as c:
        yield c


async def charge(console: Console, person: str, tokens: int, *, day: str | None = None) -> None:
    day = day or day_of(time.time())
    usage = Usage(tokens, 0)
    await console.store.add_usage(
        [Charge(day, f"chat-{person}", "model-a", CallKind.ROUND, usage, 0.01, True, person)]
    )


async def audit_actions(console: Console) -> list[tuple[str, str, str]]:
    entries = await console.store.audit_log(before_id=None, limit=50)
    return [(e.action, e.target, e.detail) for e in entries if e.action not in ("sign_in",)]


async def test_the_list_shows_usage_against_limits_newest_first_and_searches(
    console: Console,
) -> None:
    yesterday = day_of(time.time() - 86_400)
    await charge(console, "tg:1", 1200, day=yesterday)
    await charge(console, "tg:2", 3000)
    await charge(console, "tg:9", 10)
    await charge(console, HOSTILE_PERSON, 5)
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/people")
    assert status == 200
    # Newest activity first, then by key: yesterday's person last.
    listed = re.findall(r'<a href="/admin/people/([^"]+)">', html)
    assert listed == ["tg%3A2", "tg%3A9", "tg%3A1"]  # a key no page takes is not a link
    assert "3,000 / 5,000" in html  # today's tokens against the daily limit
    assert "exempt (settings)" in html  # tg:9
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    status, html = await console.page("/admin/people?q=tg:2")
    assert status == 200 and "tg:2" in html and "tg:1<" not in html


async def test_the_list_shows_a_stored_bots_people_against_that_bots_limits(
    console: Console,
) -> None:
    """A stored bot's person is listed against the bot's own daily token limit, the
    deployment's person against USER_DAILY_TOKEN_LIMIT."""
    new = NewBot(222, "shop_bot", "sealed", "tail", "", BotProfile(limits=BotLimits(700)))
    bot = await console.store.bots.add_bot(new, at=time.time())
    await charge(console, f"tg{bot.id}:5", 300)
    await charge(console, "tg:5", 400)
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/people")
    assert status == 200 and "300 / 700" in html and "400 / 5,000" in html


async def test_people_page_through_without_repeats(console: Console) -> None:
    today = day_of(time.time())
    for n in range(5):
        await charge(console, f"tg:{n + 1}", 10)
    seen: list[str] = []
    after = None
    while True:
        rows = await console.store.list_people(
            PeopleQuery(today, month_start(today), after=after, limit=2)
        )
        if not rows:
            break
        seen += [r.person for r in rows]
        after = (rows[-1].last_day, rows[-1].person)
    assert seen == [f"tg:{n}" for n in range(1, 6)]
    found = await console.store.list_people(PeopleQuery(today, month_start(today), search="3"))
    assert [r.person for r in found] == ["tg:3"]
    assert (found[0].tokens_today, found[0].override) == (10, None)


async def test_setting_a_quota_through_the_form_is_audited_and_applies(console: Console) -> None:
    person = telegram_person(7)
    await charge(console, person, 100)
    assert await console.sign_in() == 303
    csrf = await console.csrf(f"/admin/people/{person}")
    path = f"/admin/people/{person}/quota"
    answer = await console.client.post(
        path, data={"csrf": csrf, "limit": "tokens", "tokens": "50"}, allow_redirects=False
    )
    assert answer.status == 303 and answer.headers["Location"] == f"/admin/people/{person}"
    assert await console.store.load_quota_override(person) == QuotaOverride(person, 50)
    quota = await console.engine.quotas.of_person(person)
    assert quota.limits.daily_tokens == 50 and quota.limits.overridden
    status, html = await console.page(f"/admin/people/{person}")
    assert status == 200 and 'value="50"' in html
    await console.client.post(path, data={"csrf": csrf, "limit": "exempt"})
    assert await console.store.load_quota_override(person) == QuotaOverride(person, None)
    await console.client.post(path, data={"csrf": csrf, "limit": "default"})
    assert await console.store.load_quota_override(person) is None
    assert await audit_actions(console) == [
        ("set_quota", person, "default limits"),
        ("set_quota", person, "exempt"),
        ("set_quota", person, "daily tokens 50"),
    ]


async def test_out_of_range_and_malformed_limits_change_nothing(console: Console) -> None:
    person = telegram_person(7)
    assert await console.sign_in() == 303
    csrf = await console.csrf(f"/admin/people/{person}")
    path = f"/admin/people/{person}/quota"
    for tokens in ("0", str(MAX_OVERRIDE_TOKENS + 1), "-5", "1e3", "abc", "9" * 5000, ""):
        answer = await console.client.post(
            path, data={"csrf": csrf, "limit": "tokens", "tokens": tokens}
        )
        assert answer.status == 400, tokens
    for choice in ("", "off", "x" * 1000):
        answer = await console.client.post(path, data={"csrf": csrf, "limit": choice})
        assert answer.status == 400, choice
    answer = await console.client.post(
        path, data={"limit": "tokens", "tokens": "10"}, allow_redirects=False
    )
    assert answer.status == 403  # no CSRF token
    answer = await console.client.post(
        path, data={"csrf": "0" * len(csrf), "limit": "exempt"}, allow_redirects=False
    )
    assert answer.status == 403
    assert await console.store.load_quota_override(person) is None
    assert await audit_actions(console) == []


async def test_deleting_memory_is_confirmed_audited_and_shown_inert(console: Console) -> None:
    person = telegram_person(7)
    await console.store.add_facts(person, person, [HOSTILE_FACT, "lives in Oslo"], at=time.time())
    await console.store.add_facts("tg:-100", person, ["in the group: a fact"], at=time.time())
    await console.engine.languages.choose(person, "ru")
    assert await console.engine.languages.of(person) == "ru"  # now kept by this process
    assert await console.sign_in() == 303
    status, html = await console.page(f"/admin/people/{person}")
    assert status == 200
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html
    assert "\u202e" not in html and "lives in Oslo" in html and "in the group" in html
    csrf = await console.csrf(f"/admin/people/{person}")
    path = f"/admin/people/{person}/forget-memory"
    assert (await console.client.post(path, data={"csrf": csrf})).status == 400  # unconfirmed
    answer = await console.client.post(path, data={"confirm": "yes"}, allow_redirects=False)
    assert answer.status == 403
    assert len(await console.store.person_facts(person, limit=20)) == 3
    answer = await console.client.post(
        path, data={"csrf": csrf, "confirm": "yes"}, allow_redirects=False
    )
    assert answer.status == 303
    assert await console.store.person_facts(person, limit=20) == []
    assert await console.store.load_language(person) is None
    assert await console.engine.languages.of(person) is None  # this process's cache dropped
    assert await audit_actions(console) == [("forget_memory", person, "")]


async def test_a_person_page_lists_their_tool_calls_and_deleting_memory_deletes_them(
    console: Console,
) -> None:
    """The page lists this month's tool calls by tool (today's beside them, failures
    said), a name no toolbox offered under one row; with no facts the delete form is
    still there, and deleting removes the tool calls (as /forget does)."""
    person = telegram_person(8)
    now = time.time()
    uses = [
        ToolUse("time__get_current_time", "time", "get_current_time", "{}", "03:00"),
        ToolUse("docs__search", "docs", "search", "{}", error="late", failure=ToolFailure.TIMEOUT),
        ToolUse("<b>made</b>", "", "", "{}", error="no", failure=ToolFailure.UNKNOWN_TOOL),
    ]
    charged = Accounting().charge(
        Usage(1, 1), model="model-a", kind=CallKind.ROUND, chat="tg:8",
        payer=Payer(person=person), at=now, tool_uses=uses,
    )  # fmt: skip
    await console.store.add_usage([charged])
    assert await console.sign_in() == 303
    status, html = await console.page(f"/admin/people/{person}")
    assert status == 200
    assert (
        '<td data-label="Tool">docs · search</td><td data-label="Today">1 (1 failed)</td>' in html
    )
    assert '<td data-label="Tool">time · get_current_time</td>' in html
    assert "tools no toolbox offered" in html and "&lt;b&gt;made" not in html
    csrf = await console.csrf(f"/admin/people/{person}")
    answer = await console.client.post(
        f"/admin/people/{person}/forget-memory",
        data={"csrf": csrf, "confirm": "yes"},
        allow_redirects=False,
    )
    assert answer.status == 303
    assert (await console.engine.figures.usage(ScopeKind.PERSON, person)).tools == ToolCalls()
    status, html = await console.page(f"/admin/people/{person}")
    assert "No tool calls this month." in html and "Delete all memory" not in html


async def test_forged_and_oversized_person_keys_are_404(console: Console) -> None:
    assert await console.sign_in() == 303
    csrf = await console.csrf()
    for key in (
        "tg:0",
        "tg:abc",
        "tg:" + "1" * 20,
        "api:" + "a" * 129,
        "api:",
        "chat:1",
        "%3Cscript%3E",
        "api:%20x",
        "x" * 5000,
    ):
        status, _ = await console.page(f"/admin/people/{key}")
        assert status == 404, key
        answer = await console.client.post(
            f"/admin/people/{key}/quota", data={"csrf": csrf, "limit": "exempt"}
        )
        assert answer.status == 404, key
    for query in (
        "?q=" + "a" * 101,
        "?q=%3Cb%3E%20x",
        "?after=nonsense",
        "?after=2026-01-01~bad key",
    ):
        status, _ = await console.page(f"/admin/people{query}")
        assert status == 400, query
    assert await audit_actions(console) == []


async def test_every_person_listed_is_a_working_page_or_not_a_link(console: Console) -> None:
    """The terminal console is charged as `console:local`: listed, but as text, since no
    Telegram or API user has that key; every link on the list opens a page."""
    await charge(console, "console:local", 40)
    await charge(console, "tg:3", 10)
    await charge(console, "api:u-1", 10)
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/people")
    assert status == 200
    assert "console:local <small>(the terminal console)</small>" in html
    links = re.findall(r'<a href="(/admin/people/[^"]+)">', html)
    assert links == ["/admin/people/api%3Au-1", "/admin/people/tg%3A3"]
    for link in links:
        assert (await console.page(link))[0] == 200


async def test_a_person_page_names_each_limit_or_its_absence(console: Console) -> None:
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/people/tg:7")
    assert status == 200
    assert "5,000 tokens a day, no monthly token limit, no daily consultation limit</dd>" in html
    assert "no a month" not in html
    status, html = await console.page("/admin/people/tg:9")
    assert status == 200 and "<dd>exempt (settings)</dd>" in html


async def test_an_api_consultation_names_its_user_and_leads_to_blocking_them(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """A session the API answered for `userId` u-7: its page names `api:u-7` and links to
    their page, whose Block the API then enforces."""
    sqlite = STORE_KINDS[0]
    settings = console_settings(
        sqlite,
        await sqlite.new_database(tmp_path),
        api_enabled=True,
        memory_enabled=True,
        openai_base_url=model_server.base_url,
        llm_structured_questions="off",
    )
    async with running_console(settings) as c:
        model_server.enqueue("Rotate the keys.")
        model_server.enqueue("none")  # what memory keeps of it
        ask = {"message": "Leak our keys?", "userId": "u-7"}
        headers = {"Content-Type": "application/json"}
        answer = await c.client.post("/api/chat", data=json.dumps(ask), headers=headers)
        assert answer.status == 200
        session = (await answer.json())["sessionId"]
        assert await c.sign_in() == 303
        status, html = await c.page(f"/admin/consultations/{session}")
        assert status == 200
        link = re.search(r'<dt>Person</dt><dd><a href="([^"]+)"><bdi>api:u-7</bdi></a>', html)
        assert link is not None and link.group(1) == "/admin/people/api%3Au-7"
        status, html = await c.page(link.group(1))
        assert status == 200 and '<button type="submit" class="danger">Block</button>' in html
        csrf = await c.csrf(link.group(1))
        blocked = await c.client.post(
            f"{link.group(1)}/block", data={"csrf": csrf, "blocked": "yes"}
        )
        assert blocked.status == 200
        again = await c.client.post("/api/chat", data=json.dumps(ask), headers=headers)
        assert again.status == 403 and (await again.json())["code"] == "FORBIDDEN"


async def test_a_consultation_names_the_telegram_user_who_started_it_or_says_none_is_known(
    tmp_path: Path,
) -> None:
    sqlite = STORE_KINDS[0]
    settings = console_settings(sqlite, await sqlite.new_database(tmp_path))
    async with running_console(settings) as c:
        in_group = consultation(chat_key="tg:-100123")
        in_group.started_by = 42
        unknown = consultation(chat_key="api:8d0c5f0e")  # no userId, no memory
        for found in (in_group, unknown):
            await c.store.create(found)
        assert await c.sign_in() == 303
        status, html = await c.page(f"/admin/consultations/{in_group.id}")
        assert status == 200
        assert '<dt>Person</dt><dd><a href="/admin/people/tg%3A42"><bdi>tg:42</bdi>' in html
        status, html = await c.page(f"/admin/consultations/{unknown.id}")
        assert status == 200 and '<dt>Person</dt><dd><span class="empty">not recorded' in html
