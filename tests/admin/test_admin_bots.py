"""The console's Bots page on a real server and store (SQLite and PostgreSQL), tokens checked
with the fake Bot API: add → listed → changed → disabled → enabled → removed, each change
audited; and hostile forms: forged or missing CSRF tokens, a token Telegram refuses, a
10 KB token, a label with control characters, unknown settings, unknown bot ids — each
refused changing nothing. No page, answer or audit entry ever shows a token."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import pytest

from core.domain.bots import api_token_digest
from fakes.bot_api import FakeBotApi
from tests.admin_harness import HTML, Console, console_settings, running_console
from tests.store_contract import StoreKind, make

SHOP = "111222:AAF-shop-secret-token_WXYZ"
MAIN = "999000:AAH-main-secret-token_MAIN"
UNKNOWN = "555666:AAJ-nobody-knows-this-token"
DESK = "333444:AAG-desk-secret-token_DESK"
SECRETS = [t.split(":")[1][:-4] for t in (SHOP, MAIN, UNKNOWN, DESK)]
OPERATOR = "operator-api-token-0123456789abcdef"
"""The deployment's API_TOKEN (no bot may be given it)."""
PASTED = "pasted-api-token-of-the-shop-0123456789"


@pytest.fixture
async def telegram() -> AsyncIterator[FakeBotApi]:
    server = FakeBotApi(
        tokens={
            SHOP: (111222, "shop_bot"),
            MAIN: (999000, "main_bot"),
            DESK: (333444, "desk_bot"),
        }
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def console(kind: StoreKind, database: str, telegram: FakeBotApi) -> AsyncIterator[Console]:
    settings = console_settings(
        kind,
        database,
        telegram_api_base_url=telegram.base_url,
        telegram_bot_token=MAIN,
        secret_key="k" * 32,
        api_token=OPERATOR,
    )
    async with running_console(settings) as c:
        yield c


async def post(console: Console, path: str, data: dict[str, str]) -> tuple[int, str]:
    response = await console.client.post(path, data=data, headers=HTML, allow_redirects=False)
    text = await response.text()
    for secret in SECRETS:
        assert secret not in text
    return response.status, text


async def signed_in(console: Console) -> str:
    assert await console.sign_in() == 303
    return await console.csrf("/admin/bots")


async def bots_audit(console: Console) -> list[tuple[str, str, str]]:
    entries = await console.store.audit_log(before_id=None, limit=100)
    found = [
        (e.action, e.target, e.detail) for e in reversed(entries) if e.action.startswith("bot")
    ]
    for entry in found:
        assert not any(secret in part for secret in SECRETS for part in entry)
    return found


async def test_a_bot_is_added_changed_switched_and_removed_and_each_step_audited(
    console: Console, telegram: FakeBotApi
) -> None:
    """The page adds a bot Telegram confirms, lists it with …WXYZ only, changes its
    settings, disables, enables and removes it; the audit log names each step."""
    csrf = await signed_in(console)
    status, _ = await post(
        console,
        "/admin/bots/add",
        {"csrf": csrf, "token": SHOP, "label": "Shop", "rounds": "4", "language": "de"},
    )
    assert status == 303
    status, html = await console.page("/admin/bots")
    assert status == 200
    assert "@shop_bot" in html and "…WXYZ" in html and "rounds=4 language=de" in html
    assert all(secret not in html for secret in SECRETS)
    bot = (await console.store.bots.bots())[0]
    changes = {
        "csrf": csrf,
        "label": "Shop 2",
        "instruction": "Sell kettles.",
        "rounds": "",
        "language": "de",
        "limits.daily_consultations": "3",
    }
    assert (await post(console, f"/admin/bots/{bot.id}/set", changes))[0] == 303
    status, html = await console.page("/admin/bots")
    assert 'name="limits.daily_consultations" min="0" value="3"' in html
    assert (await post(console, f"/admin/bots/{bot.id}/disable", {"csrf": csrf}))[0] == 303
    assert not (await console.store.bots.bots())[0].enabled
    assert (await post(console, f"/admin/bots/{bot.id}/enable", {"csrf": csrf}))[0] == 303
    status, html = await post(console, f"/admin/bots/{bot.id}/remove", {"csrf": csrf})
    assert status == 400 and "confirmation box" in html
    remove = {"csrf": csrf, "confirm": "yes"}
    assert (await post(console, f"/admin/bots/{bot.id}/remove", remove))[0] == 303
    assert await console.store.bots.bots() == []
    target = f"bot {bot.id} @shop_bot"
    assert await bots_audit(console) == [
        ("bot_add", target, "added @shop_bot Shop: rounds=4 language=de"),
        (
            "bot_set",
            target,
            "settings @shop_bot Shop 2: instruction=13 chars language=de"
            " limits.daily_consultations=3",
        ),
        ("bot_disable", target, "disabled"),
        ("bot_enable", target, "enabled"),
        ("bot_remove", target, "removed; what it stored is kept"),
    ]
    status, html = await console.page("/admin/audit")
    assert status == 200 and "bot_add" in html


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"token": UNKNOWN}, "Telegram refused the token (401 Unauthorized)"),
        ({"token": "1:" + "A" * 10_000}, "that is not a bot token"),
        ({"token": SHOP, "label": "evil\x1b[2J\nlabel"}, "label: up to 100 printable"),
        ({"token": SHOP, "rounds": "lots"}, "rounds: a whole number"),
        ({"token": SHOP, "role": "no_such_role"}, "is none of the prompt library"),
        ({"token": SHOP, "role": "expert", "instruction": "Be nice."}, "set one or the other"),
        ({"token": MAIN}, "this deployment&#39;s own bot"),
    ],
)
async def test_a_refused_add_says_why_stores_nothing_and_never_echoes_the_token(
    console: Console, fields: dict[str, str], says: str
) -> None:
    """A token Telegram refuses, a 10 KB token, a label with control characters, bad
    settings or the deployment's own bot: 400 saying why, nothing stored, no audit entry,
    and the token's field comes back empty."""
    csrf = await signed_in(console)
    status, html = await post(console, "/admin/bots/add", {"csrf": csrf, **fields})
    assert status == 400
    assert says in html
    assert 'name="token" required' in html and 'name="token" value' not in html
    assert await console.store.bots.count_bots() == 0
    assert await bots_audit(console) == []


async def test_forged_csrf_or_no_session_changes_nothing(
    console: Console, telegram: FakeBotApi
) -> None:
    """A post without the session's CSRF token is 403, without a session 401: no getMe
    call, nothing stored."""
    csrf = await signed_in(console)
    for data in ({"token": SHOP}, {"token": SHOP, "csrf": "forged" + csrf[6:]}):
        assert (await post(console, "/admin/bots/add", data))[0] == 403
    console.client.session.cookie_jar.clear()
    response = await console.client.post("/admin/bots/add", data={"csrf": csrf, "token": SHOP})
    assert response.status == 401
    assert telegram.calls_of("getMe") == []
    assert await console.store.bots.count_bots() == 0


async def test_unknown_bots_and_bad_changes_are_refused(console: Console) -> None:
    """Paths naming no bot are 404; a change with a bad value is 400 and changes nothing."""
    csrf = await signed_in(console)
    assert (await post(console, "/admin/bots/add", {"csrf": csrf, "token": SHOP}))[0] == 303
    bot = (await console.store.bots.bots())[0]
    for path in ("/admin/bots/999/disable", "/admin/bots/abc/enable", "/admin/bots/9" * 3):
        assert (await post(console, path, {"csrf": csrf, "confirm": "yes"}))[0] == 404
    status, html = await post(
        console, f"/admin/bots/{bot.id}/set", {"csrf": csrf, "rounds": "0", "label": "x"}
    )
    assert status == 400 and "rounds: a whole number from 1 to 20" in html
    assert await console.store.bots.bots() == [bot]


async def test_a_bot_removed_with_its_data_leaves_the_others_data(console: Console) -> None:
    """Remove with "delete what it stored" ticked deletes the bot's consultations (its
    scope's) and says so in the audit log; the deployment's bot's stay."""
    csrf = await signed_in(console)
    assert (await post(console, "/admin/bots/add", {"csrf": csrf, "token": SHOP}))[0] == 303
    [bot] = await console.store.bots.bots()
    for chat_key in ("tg:5", f"tg{bot.id}:5"):
        await console.store.create(make(chat_key))
    remove = {"csrf": csrf, "confirm": "yes", "data": "delete"}
    assert (await post(console, f"/admin/bots/{bot.id}/remove", remove))[0] == 303
    assert await console.store.load_active(f"tg{bot.id}:5") is None
    assert await console.store.load_active("tg:5") is not None
    [entry] = [e for e in await bots_audit(console) if e[0] == "bot_remove"]
    assert entry[2] == "removed; what it stored is deleted (1 consultation)"


async def test_a_bots_plans_are_set_shown_and_kept_by_a_change(console: Console) -> None:
    """Plans entered in the add form are stored; the change form carries them back as JSON
    (so a change of another setting keeps them); bad plans are refused changing nothing;
    an empty field goes back to the deployment's PLANS."""
    csrf = await signed_in(console)
    gold = [{"id": "gold", "title": {"en": "Gold", "ru": "Золото"}, "stars": 75, "days": 7}]
    added = {"csrf": csrf, "token": SHOP, "plans": json.dumps(gold)}
    assert (await post(console, "/admin/bots/add", added))[0] == 303
    [bot] = await console.store.bots.bots()
    assert bot.profile.plans is not None and bot.profile.plans[0].id == "gold"
    status, html = await console.page("/admin/bots")
    assert status == 200 and "plans=gold" in html
    shown = html.split('<textarea name="plans" rows="3">', 1)[1].split("</textarea>", 1)[0]
    carried = json.loads(shown)
    assert carried[0]["id"] == "gold" and carried[0]["title"]["ru"] == "Золото"
    change = {"csrf": csrf, "rounds": "2", "plans": shown}
    assert (await post(console, f"/admin/bots/{bot.id}/set", change))[0] == 303
    [kept] = await console.store.bots.bots()
    assert kept.profile.plans == bot.profile.plans and kept.profile.rounds == 2
    bad = {"csrf": csrf, "plans": '[{"id": "gold", "title": "Gold", "stars": 0}]'}
    status, html = await post(console, f"/admin/bots/{bot.id}/set", bad)
    assert status == 400 and "plans: plan &#39;gold&#39;: stars" in html
    assert await console.store.bots.bots() == [kept]
    assert (await post(console, f"/admin/bots/{bot.id}/set", {"csrf": csrf}))[0] == 303
    assert (await console.store.bots.bots())[0].profile.plans is None


async def test_a_bot_with_an_api_token_is_marked_without_showing_it(console: Console) -> None:
    """A bot given its own API token (on the command line) is marked "API token set" on the
    page; neither the token nor its digest is in it."""
    csrf = await signed_in(console)
    await post(console, "/admin/bots/add", {"csrf": csrf, "token": SHOP, "label": "Shop"})
    (bot,) = await console.store.bots.bots()
    status, page = await console.page("/admin/bots")
    assert status == 200 and "API token set" not in page
    digest = "d" * 64
    await console.store.bots.set_bot_api_token(bot.id, digest, at=1.0)
    status, page = await console.page("/admin/bots")
    assert status == 200 and page.count("API token set") == 1 and digest not in page


def shows_no_api_token(text: str, *tokens: str) -> bool:
    """Neither any of `tokens` nor its SHA-256 is in `text`."""
    return not any(t in text or api_token_digest(t) in text for t in (OPERATOR, *tokens))


async def shop_bot(console: Console, csrf: str) -> int:
    assert (await post(console, "/admin/bots/add", {"csrf": csrf, "token": SHOP}))[0] == 303
    (bot,) = await console.store.bots.bots()
    return bot.id


async def api_token_hash(console: Console, bot_id: int) -> str | None:
    (bot,) = [b for b in await console.store.bots.bots() if b.id == bot_id]
    return bot.api_token_hash


async def test_a_bots_api_token_is_pasted_generated_once_shown_and_removed(
    console: Console,
) -> None:
    """A pasted token is stored as its SHA-256 and never shown; Generate stores a new one
    and shows it on that answer only, with the warning; Remove (confirmed) takes it away.
    The audit log says set, generated, removed — never a token nor its digest."""
    csrf = await signed_in(console)
    bot_id = await shop_bot(console, csrf)
    path = f"/admin/bots/{bot_id}/api_token"
    status, html = await post(console, path, {"csrf": csrf, "api_token": f"  {PASTED}\n"})
    assert status == 303 and shows_no_api_token(html, PASTED)
    assert await api_token_hash(console, bot_id) == api_token_digest(PASTED)
    status, html = await console.page("/admin/bots")
    assert status == 200 and "API token set" in html and shows_no_api_token(html, PASTED)
    assert 'name="api_token" value' not in html

    status, html = await post(console, path, {"csrf": csrf, "generate": "yes"})
    assert status == 200 and "it will not be shown again" in html
    found = re.search(r'value="([0-9a-f]{64})" aria-label="The new API token"', html)
    assert found is not None
    generated = found.group(1)
    assert await api_token_hash(console, bot_id) == api_token_digest(generated)
    assert api_token_digest(generated) not in html and PASTED not in html
    status, html = await console.page("/admin/bots")
    assert status == 200 and "it will not be shown again" not in html
    assert shows_no_api_token(html, PASTED, generated) and "API token set" in html

    remove = f"/admin/bots/{bot_id}/api_token/remove"
    status, html = await post(console, remove, {"csrf": csrf})
    assert status == 400 and "confirmation box" in html
    assert await api_token_hash(console, bot_id) == api_token_digest(generated)
    assert (await post(console, remove, {"csrf": csrf, "confirm": "yes"}))[0] == 303
    assert await api_token_hash(console, bot_id) is None
    status, html = await console.page("/admin/bots")
    assert status == 200 and "API token set" not in html and "Remove API token" not in html

    entries = [e for e in await bots_audit(console) if e[0] == "bot_api_token"]
    target = f"bot {bot_id} @shop_bot"
    assert entries == [
        ("bot_api_token", target, "API token set"),
        ("bot_api_token", target, "API token generated"),
        ("bot_api_token", target, "API token removed"),
    ]
    status, html = await console.page("/admin/audit")
    assert status == 200 and shows_no_api_token(html, PASTED, generated)


@pytest.mark.parametrize(
    ("token", "says"),
    [
        ("", "paste a token or press Generate"),
        ("   ", "paste a token or press Generate"),
        ("short-token", "api_token: 32 to 256 letters"),
        ("x" * 10_000, "api_token: 32 to 256 letters"),
        ("two words and more than thirty-two characters", "api_token: 32 to 256 letters"),
        ("line\nbreak-and-more-than-thirty-two-chars", "api_token: 32 to 256 letters"),
        ("ctrl\x1b[2J-and-more-than-thirty-two-chars", "api_token: 32 to 256 letters"),
        ("ünïcödé-and-more-than-thirty-two-characters", "api_token: 32 to 256 letters"),
        (OPERATOR, "that is API_TOKEN, the operator&#39;s"),
        ("taken", "@desk_bot has that token"),
    ],
)
async def test_a_refused_api_token_says_why_and_changes_nothing(
    console: Console, token: str, says: str
) -> None:
    """Empty, too short, 10 KB, spaces, control characters, non-ASCII, API_TOKEN itself or
    another bot's token: 400 saying why (the CLI's words), the stored digest unchanged, no
    audit entry, the token not echoed."""
    csrf = await signed_in(console)
    bot_id = await shop_bot(console, csrf)
    desk = {"csrf": csrf, "token": DESK}
    assert (await post(console, "/admin/bots/add", desk))[0] == 303
    (desk_id,) = [b.id for b in await console.store.bots.bots() if b.id != bot_id]
    given = {"csrf": csrf, "api_token": PASTED}
    assert (await post(console, f"/admin/bots/{bot_id}/api_token", given))[0] == 303
    if token == "taken":
        token = "desk-api-token-0123456789abcdef-0123"
        ok = {"csrf": csrf, "api_token": token}
        assert (await post(console, f"/admin/bots/{desk_id}/api_token", ok))[0] == 303
    before = await bots_audit(console)
    form = {"csrf": csrf, "api_token": token}
    status, html = await post(console, f"/admin/bots/{bot_id}/api_token", form)
    assert status == 400 and says in html
    assert token.strip() == "" or token not in html
    assert shows_no_api_token(html, PASTED)
    assert await api_token_hash(console, bot_id) == api_token_digest(PASTED)
    assert await bots_audit(console) == before


async def test_api_token_posts_without_csrf_or_for_no_bot_change_nothing(
    console: Console,
) -> None:
    """No or a forged CSRF token is 403, no session 401, an unknown or malformed bot id
    404: nothing stored, nothing audited."""
    csrf = await signed_in(console)
    bot_id = await shop_bot(console, csrf)
    path = f"/admin/bots/{bot_id}/api_token"
    for data in ({"generate": "yes"}, {"api_token": PASTED, "csrf": "forged" + csrf[6:]}):
        assert (await post(console, path, data))[0] == 403
        assert (await post(console, path + "/remove", {**data, "confirm": "yes"}))[0] == 403
    for other in ("999", "abc", "9" * 30):
        status, _ = await post(
            console, f"/admin/bots/{other}/api_token", {"csrf": csrf, "generate": "yes"}
        )
        assert status == 404
        remove = {"csrf": csrf, "confirm": "yes"}
        assert (await post(console, f"/admin/bots/{other}/api_token/remove", remove))[0] == 404
    console.client.session.cookie_jar.clear()
    response = await console.client.post(path, data={"csrf": csrf, "generate": "yes"})
    assert response.status == 401
    assert await api_token_hash(console, bot_id) is None
    assert [e for e in await bots_audit(console) if e[0] == "bot_api_token"] == []
