"""The console in a real browser: Debian's Chromium driven by Playwright against the
real server on 127.0.0.1 — sign in, open the list, filter it, open a transcript, sign
out; read the dashboard, set a person's quota and see the bot (on the same store) refuse
their next message; upload a document to the knowledge base, search it and delete it; add a
bot whose token the fake Bot API confirms, disable and remove it; set, generate and remove a
bot's API token (the generated one shown once); filter the payments and
refund one through the fake Bot API —
with no error in the browser's console (a Content-Security-Policy
violation would be one).

Chromium is `/usr/bin/chromium` (`apt-get install chromium`; Playwright's own browser
download is not used). Without it these tests skip outside CI and fail in CI (`CI` set).
With ADMIN_SCREENSHOTS=1 they save screenshots of the dashboard, the list and a
transcript in docs/images/.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from core.domain.bots import BotProfile, NewBot, api_token_digest
from core.domain.consultation import Status, Usage
from core.domain.usage import CallKind, Charge, day_of
from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.admin_harness import TOKEN, Console, console_settings, consultation, running_console
from tests.bot_harness import ask_private, started_bot
from tests.store_contract import STORE_KINDS

if TYPE_CHECKING:
    from app.stores import Store

CHROMIUM = Path("/usr/bin/chromium")
IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"

if not CHROMIUM.exists():
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium", pytrace=False)
    pytest.skip(f"no {CHROMIUM}: browser tests skipped", allow_module_level=True)

from playwright.async_api import Page, async_playwright, expect  # noqa: E402

pytestmark = pytest.mark.timeout(120)
SQLITE = STORE_KINDS[0]


@pytest.fixture
async def console(tmp_path: Path) -> AsyncIterator[Console]:
    address = await SQLITE.new_database(tmp_path)
    settings = console_settings(SQLITE, address, eval_reports_dir=tmp_path / "reports")
    async with running_console(settings) as c:
        day = 1_764_140_000.0
        await c.store.create(
            consultation(
                "Which database should a small team pick for a booking app?\n\n"
                "We expect a few hundred bookings a day and <b>two</b> services writing.",
                chat_key="tg:1001",
                at=day,
                final="## Recommendation\n\nUse **PostgreSQL**: several services can write "
                "at once, and backups are routine.\n\n- Start with one instance\n"
                "- Add a replica later\n\n[Read more](https://www.postgresql.org/docs/)",
            )
        )
        await c.store.create(
            consultation(
                "How do I water tomatoes in a heat wave?", chat_key="tg:1002", at=day - 90_000
            )
        )
        await c.store.create(
            consultation(
                "Contract review: is a 90-day notice period usual?",
                chat_key="api:7f1c",
                at=day - 200_000,
                final=None,
            )
        )
        yield c


@contextlib.asynccontextmanager
async def browser_page() -> AsyncIterator[Page]:
    """A page of a fresh headless Chromium; any error in its console fails the test."""
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        context = await browser.new_context(viewport={"width": 1100, "height": 800})
        page = await context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        yield page
        await browser.close()
        assert errors == [], errors


@pytest.fixture
async def page(console: Console) -> AsyncIterator[Page]:
    async with browser_page() as opened:
        yield opened


def _shoot() -> bool:
    return os.environ.get("ADMIN_SCREENSHOTS") == "1"


async def test_sign_in_list_filter_transcript_and_sign_out(console: Console, page: Page) -> None:
    base = str(console.client.make_url("/admin/")).rstrip("/")
    await page.goto(f"{base}/consultations")
    await expect(page).to_have_url(f"{base}/login")  # no session: the sign-in page
    await page.fill("#token", TOKEN)
    await page.click("button[type=submit]")
    await expect(page.locator("h1")).to_have_text("Dashboard")

    await page.click("nav >> text=Consultations")
    rows = page.locator("table.list tbody tr")
    await expect(rows).to_have_count(3)
    if _shoot():
        await page.screenshot(path=str(IMAGES / "admin-consultations.png"), full_page=True)

    await page.fill("input[name=q]", "database")
    await page.click("form.filters button[type=submit]")
    await expect(rows).to_have_count(1)
    await page.select_option("select[name=status]", "active")
    await page.click("form.filters button[type=submit]")
    await expect(page.locator("text=No consultation matches")).to_be_visible()
    await page.click("text=Clear")
    await expect(rows).to_have_count(3)

    await page.click("text=Which database should a small team pick")
    await expect(page.locator("h2", has_text="Final answer")).to_be_visible()
    await expect(page.locator(".markdown strong")).to_have_text("PostgreSQL")
    await expect(page.locator(".options li.chosen")).to_contain_text("Several")
    await expect(page.locator("text=<b>two</b>")).to_be_visible()  # shown as text
    if _shoot():
        await page.set_viewport_size({"width": 390, "height": 844})
        await page.screenshot(path=str(IMAGES / "admin-transcript.png"), full_page=True)
        await page.set_viewport_size({"width": 1100, "height": 800})

    await page.click("text=Sign out")
    await expect(page).to_have_url(f"{base}/login")
    await page.goto(f"{base}/consultations")
    await expect(page).to_have_url(f"{base}/login")


ROUNDS_USED = (1, 2, 2, 2, 3, 3, 4)
"""Rounds the seeded consultations use, in turn: most ask a question or two first."""


async def seed_figures(store: Store, person: str, now: float) -> None:
    """A month of activity for the dashboard: one to four consultations started each day,
    most answered in 1 to 4 rounds (2 or 3 most often), some reset or expired; tokens
    charged each day; `person` charged today."""
    for days_ago in range(30):
        for n in range(1 + (days_ago * 7 + 2) % 4):
            at = now - days_ago * 86_400 - n * 600
            status = Status.COMPLETE
            if (days_ago + n) % 5 == 2:
                status = Status.RESET
            elif (days_ago + n) % 7 == 3:
                status = Status.EXPIRED
            rounds = ROUNDS_USED[(days_ago * 3 + n * 5) % len(ROUNDS_USED)]
            found = consultation(
                f"Question {days_ago}.{n}",
                chat_key=f"tg:{2000 + days_ago}",
                at=at,
                final="Here is my answer." if status is Status.COMPLETE else None,
                clarifying=rounds - 1,
            )
            await store.create(found)
            await store.set_status(found.id, status, at=at + 120 + 40 * n)
    charges = [
        Charge(
            day_of(now - days_ago * 86_400),
            f"tg:{2000 + days_ago}",
            "model-a" if days_ago % 3 else "model-b",
            CallKind.ROUND,
            Usage(1000 + 150 * (days_ago % 7), 300),
            0.002 * (1 + days_ago % 5),
            True,
            f"tg:{2000 + days_ago}",
        )
        for days_ago in range(30)
    ]
    charges.append(
        Charge(
            day_of(now), "tg:501", "model-a", CallKind.ROUND, Usage(400, 100), 0.01, True, person
        )
    )
    await store.add_usage(charges)


async def test_dashboard_and_a_quota_set_in_the_browser_refuse_the_bots_next_message(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """Sign in, read the dashboard (figures and charts), open a person's page, set their
    daily token limit below what they used today; the bot, on the same store, refuses
    their next message with the quota message and calls no model; sign out."""
    address = await SQLITE.new_database(tmp_path)
    person = "tg:501"
    async with running_console(console_settings(SQLITE, address)) as console:
        await seed_figures(console.store, person, time.time())
        async with async_playwright() as p:
            browser = await p.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
            )
            page = await (
                await browser.new_context(viewport={"width": 1100, "height": 800})
            ).new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            base = str(console.client.make_url("/admin/")).rstrip("/")
            await page.goto(f"{base}/")
            await page.fill("#token", TOKEN)
            await page.click("button[type=submit]")
            await expect(page.locator("h1")).to_have_text("Dashboard")
            await expect(page.locator("figure.chart svg")).to_have_count(3)
            await expect(page.locator("td.key", has_text="Completion rate")).to_be_visible()
            await expect(page.locator("table.rounds-table svg.share")).not_to_have_count(0)
            if _shoot():
                await page.screenshot(path=str(IMAGES / "admin-dashboard.png"), full_page=True)

            await page.click("nav >> text=People")
            await page.click(f"text={person}")
            await expect(page.locator("h1")).to_have_text(person)
            await page.check("input[name=limit][value=tokens]")
            await page.fill("input[name=tokens]", "100")
            await page.click("text=Save")
            await expect(page.locator("input[name=tokens]")).to_have_value("100")
            await expect(page.locator("text=set here or by /quota")).to_be_visible()

            async with started_bot(Path(address), bot_api, model_server) as bot:
                reply = await ask_private(bot, 501, "Pick a database")
                assert len(reply) == 1 and "daily token limit (100)" in reply[0], reply
                assert model_server.requests == []

            await page.click("text=Sign out")
            await expect(page).to_have_url(f"{base}/login")
            await browser.close()
            assert errors == [], errors


WIDER_THAN_THE_SCREEN = """() => [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > window.innerWidth)
    .map(e => e.tagName + (e.dataset.label ? '[' + e.dataset.label + ']' : ''))"""


async def test_the_consultations_list_fits_a_phone(console: Console, page: Page) -> None:
    """At 390 CSS pixels wide (a phone) the list with its filters, an API session's long
    key and a long request fit, and so does that session's transcript: nothing reaches
    past the screen's right edge, so nothing scrolls sideways."""
    found = consultation(
        "An API session's request, long enough to wrap: " + "word " * 40,
        chat_key="api:2f6c1a9e-8d3b-4c7a-9e5f-0b1d2c3e4f5a",
        at=1_764_140_500.0,
    )
    await console.store.create(found)
    base = str(console.client.make_url("/admin/")).rstrip("/")
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.goto(f"{base}/login")
    await page.fill("#token", TOKEN)
    await page.click("button[type=submit]")
    await expect(page.locator("h1")).to_have_text("Dashboard")
    await page.goto(f"{base}/consultations")
    await expect(page.locator("table.list tbody tr")).to_have_count(4)
    assert await page.evaluate(WIDER_THAN_THE_SCREEN) == []
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await page.click("text=An API session's request")
    await expect(page.locator("h2", has_text="Final answer")).to_be_visible()
    assert await page.evaluate(WIDER_THAN_THE_SCREEN) == []
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390


async def test_the_dashboard_shows_each_bot_and_the_total_and_picks_one(
    console: Console, page: Page
) -> None:
    """With a bot stored, the dashboard's table gives the deployment's bot, the stored bot
    and all bots; picking the stored bot in the selector shows its figures only, and the
    page still fits a phone."""
    stored = await console.store.bots.add_bot(
        NewBot(111, "desk_bot", "sealed", "WXYZ", "Tax desk", BotProfile()), at=time.time()
    )
    for chat in ("tg:7", f"tg{stored.id}:7", f"tg{stored.id}:8", f"api{stored.id}:s-1"):
        await console.store.create(consultation("A question", chat_key=chat, at=time.time()))
    base = str(console.client.make_url("/admin/")).rstrip("/")
    await page.goto(f"{base}/login")
    await page.fill("#token", TOKEN)
    await page.click("button[type=submit]")
    await expect(page.locator("h1")).to_have_text("Dashboard")
    rows = page.locator("table.by-bot tbody tr")
    await expect(rows).to_have_count(3)
    await expect(rows.nth(0)).to_contain_text("This deployment's bot")
    await expect(rows.nth(1)).to_contain_text(f"#{stored.id} @desk_bot (Tax desk)")
    await expect(rows.nth(2)).to_contain_text("All bots")
    started = page.locator("td[data-label=Started]")
    await expect(started).to_have_text(["1", "3", "4"])
    assert "sealed" not in await page.content()

    await page.click(f".bot-choice >> text=#{stored.id} @desk_bot")
    await expect(page).to_have_url(f"{base}/?bot={stored.id}")
    await expect(page.locator(".bot-choice [aria-current=page]")).to_have_text(
        f"#{stored.id} @desk_bot (Tax desk)"
    )
    figures = page.locator("table.figures-table >> nth=0")
    await expect(figures.locator("tr", has_text="Started").locator("td")).to_have_text(
        ["Started", "3", "3", "3"]
    )
    await page.click(".bot-choice >> text=This deployment's bot")
    await expect(figures.locator("tr", has_text="Started").locator("td")).to_have_text(
        ["Started", "1", "1", "1"]
    )
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.click(".bot-choice >> text=All bots")
    await expect(rows).to_have_count(3)
    assert await page.evaluate(WIDER_THAN_THE_SCREEN) == []


KETTLE_GUIDE = b"""# Kettle care

Descale the kettle every month with citric acid; never use vinegar on the steel model.

## Warranty

The kettle is covered for two years from the day of purchase.
"""


async def test_a_document_uploaded_searched_and_deleted_in_the_browser(
    console: Console, page: Page
) -> None:
    """Sign in, open the Knowledge page, upload a Markdown file through the form, see its
    outcome and its row, search a word from it and see the passage, delete it with the
    confirmation ticked, and see the knowledge base empty again."""
    base = str(console.client.make_url("/admin/")).rstrip("/")
    await page.goto(f"{base}/knowledge")
    await expect(page).to_have_url(f"{base}/login")
    await page.fill("#token", TOKEN)
    await page.click("button[type=submit]")
    await expect(page.locator("h1")).to_have_text("Dashboard")

    await page.click("nav >> text=Knowledge")
    await expect(page.locator("h1")).to_have_text("Knowledge base")
    await expect(page.locator("text=The knowledge base is empty.")).to_be_visible()
    await page.set_input_files(
        "input[name=files]",
        files=[{"name": "kettle-guide.md", "mimeType": "text/markdown", "buffer": KETTLE_GUIDE}],
    )
    await page.click("form.upload button[type=submit]")
    outcome = page.locator("table.outcomes tbody tr")
    await expect(outcome).to_have_count(1)
    await expect(outcome).to_contain_text("upload:kettle-guide.md")
    await expect(outcome.locator(".status")).to_have_text("added")
    rows = page.locator("table.documents tbody tr")
    await expect(rows).to_have_count(1)
    await expect(rows).to_contain_text("kettle-guide")
    (document,) = await console.store.knowledge.documents()
    assert document.source == "upload:kettle-guide.md" and document.chunks == 2

    await page.fill("form.search textarea[name=q]", "citric")
    await page.click("form.search button[type=submit]")
    found = page.locator("ol.passages li")
    await expect(found).to_have_count(1)
    await expect(found.locator(".where")).to_contain_text("[K1] Kettle care")  # its title
    await expect(found.locator("blockquote")).to_contain_text("Descale the kettle every month")

    await page.check("form.delete input[name=confirm]")
    await page.click("form.delete button[type=submit]")
    await expect(page).to_have_url(f"{base}/knowledge")
    await expect(page.locator("text=The knowledge base is empty.")).to_be_visible()
    assert await console.store.knowledge.documents() == []
    entries = await console.store.audit_log(before_id=None, limit=10)
    assert [e.action for e in entries][:2] == ["knowledge_delete", "knowledge_upload"]


BOT_TOKEN = "424242:AAF-browser-bot-token_WXYZ"


async def test_a_bot_added_disabled_and_removed_in_the_browser(tmp_path: Path) -> None:
    """Sign in, open the Bots page, add a bot by its token (checked with the fake Bot API),
    see it listed as @username with only …WXYZ of its token, disable it, remove it with the
    confirmation ticked; the token is never in the page."""
    telegram = FakeBotApi(tokens={BOT_TOKEN: (424242, "kettle_bot")})
    await telegram.start()
    address = await SQLITE.new_database(tmp_path)
    settings = console_settings(
        SQLITE, address, telegram_api_base_url=telegram.base_url, secret_key="k" * 32
    )
    try:
        async with running_console(settings) as console, browser_page() as page:
            base = str(console.client.make_url("/admin/")).rstrip("/")
            await page.goto(f"{base}/bots")
            await page.fill("#token", TOKEN)
            await page.click("button[type=submit]")
            await page.click("nav >> text=Bots")
            await expect(page.locator("h1")).to_have_text("Bots")
            await expect(page.locator("text=No bot added")).to_be_visible()
            await page.fill("form.add-bot input[name=token]", BOT_TOKEN)
            await page.fill("form.add-bot input[name=label]", "Kettles")
            await page.fill("form.add-bot input[name=rounds]", "2")
            await page.click("form.add-bot button[type=submit]")
            rows = page.locator("table.bots tbody tr")
            await expect(rows).to_have_count(1)
            await expect(rows).to_contain_text("@kettle_bot")
            await expect(rows).to_contain_text("…WXYZ")
            await expect(rows.locator(".status")).to_have_text("enabled")
            assert "browser-bot-token" not in await page.content()
            await page.click("form.switch button[type=submit]")
            await expect(rows.locator(".status")).to_have_text("disabled")
            await page.check("form.delete input[name=confirm]")
            await page.click("form.delete button[type=submit]")
            await expect(page.locator("text=No bot added")).to_be_visible()
            assert await console.store.bots.bots() == []
            entries = await console.store.audit_log(before_id=None, limit=10)
            assert [e.action for e in entries][:3] == ["bot_remove", "bot_disable", "bot_add"]
    finally:
        await telegram.stop()


async def test_a_bots_api_token_set_generated_and_removed_in_the_browser(
    console: Console, page: Page
) -> None:
    """On the Bots page: paste a bot's API token (marked "API token set", never shown),
    press Generate (the new token shown once with the warning, then gone on the next
    load), remove it with the confirmation ticked; the store keeps digests only."""
    bot = await console.store.bots.add_bot(
        NewBot(222, "desk_bot", "sealed", "tail", "", BotProfile()), at=time.time()
    )
    pasted = "pasted-browser-api-token-0123456789"
    base = str(console.client.make_url("/admin/")).rstrip("/")
    await page.goto(f"{base}/bots")
    await page.fill("#token", TOKEN)
    await page.click("button[type=submit]")
    await page.click("nav >> text=Bots")
    row = page.locator("table.bots tbody tr")
    await expect(row.locator("small.api-token")).to_have_count(0)
    await page.click("details.api-token summary")
    await page.fill("form.set-api-token input[name=api_token]", pasted)
    await page.click("form.set-api-token button[type=submit]")
    await expect(row.locator("small.api-token")).to_have_text("API token set")
    assert pasted not in await page.content()
    await page.click("details.api-token summary")
    await page.click("form.generate-api-token button[type=submit]")
    await expect(page.locator("section.generated")).to_contain_text("will not be shown again")
    generated = await page.locator("#generated-token").input_value()
    assert len(generated) == 64
    (stored,) = await console.store.bots.bots()
    assert stored.id == bot.id and stored.api_token_hash == api_token_digest(generated)
    await page.click("nav >> text=Bots")
    await expect(page.locator("section.generated")).to_have_count(0)
    assert generated not in await page.content()
    await page.click("details.api-token summary")
    await page.check("form.remove-api-token input[name=confirm]")
    await page.click("form.remove-api-token button[type=submit]")
    await expect(row.locator("small.api-token")).to_have_count(0)
    (stored,) = await console.store.bots.bots()
    assert stored.api_token_hash is None
    entries = await console.store.audit_log(before_id=None, limit=10)
    assert [e.detail for e in entries if e.action == "bot_api_token"] == [
        "API token removed",
        "API token generated",
        "API token set",
    ]


async def test_a_payment_filtered_and_refunded_in_the_browser(tmp_path: Path) -> None:
    """Sign in, open Payments, filter by plan, refund one payment with the confirmation
    ticked: Telegram (the fake Bot API) is asked, the row reads refunded, the audit log
    names it."""
    from core.domain.payments import Grant, Payment

    telegram = FakeBotApi()
    await telegram.start()
    address = await SQLITE.new_database(tmp_path)
    plans = (
        '[{"id": "pro", "title": "Pro", "stars": 250}, {"id": "max", "title": "Max", "stars": 900}]'
    )
    settings = console_settings(
        SQLITE,
        address,
        telegram_api_base_url=telegram.base_url,
        telegram_bot_token="123456:browser-pay-token",
        plans=plans,
    )
    try:
        async with running_console(settings) as console, browser_page() as page:
            now = time.time()
            for charge, user, plan, stars in (
                ("ch-pro", 41, "pro", 250),
                ("ch-max", 42, "max", 900),
            ):
                payment = Payment(charge, f"tg:{user}", plan, stars, "XTR", "p", now)
                await console.store.payments.record_payment(payment, Grant(plan, 86_400.0))
                telegram.charges[charge] = user
            base = str(console.client.make_url("/admin/")).rstrip("/")
            await page.goto(f"{base}/payments")
            await page.fill("#token", TOKEN)
            await page.click("button[type=submit]")
            await page.click("nav >> text=Payments")
            await expect(page.locator("h1")).to_have_text("Payments")
            rows = page.locator("table.list tbody tr")
            await expect(rows).to_have_count(2)
            await page.select_option("select[name=plan]", "max")
            await page.click("form.filters button[type=submit]")
            await expect(rows).to_have_count(1)
            await expect(rows).to_contain_text("ch-max")
            await page.check("form.refund input[name=confirm]")
            await page.click("form.refund button[type=submit]")
            await expect(rows.filter(has_text="ch-max")).to_contain_text("refunded")
            assert telegram.refunds == [(42, "ch-max")]
            assert await console.store.payments.active_plan("tg:42", time.time()) is None
            entries = await console.store.audit_log(before_id=None, limit=10)
            assert entries[0].action == "refund" and entries[0].target == "ch-max"
    finally:
        await telegram.stop()


async def test_a_subscription_cancelled_in_the_browser(tmp_path: Path) -> None:
    """A subscription's row has Cancel renewal (a one-time plan's has not): ticked and
    pressed, Telegram is asked editUserStarSubscription, nothing is refunded, the plan
    stays and the audit log names the cancel; the row then reads renewal cancelled and
    offers Resume renewal, which undoes it."""
    from core.domain.payments import Grant, Payment

    telegram = FakeBotApi()
    await telegram.start()
    address = await SQLITE.new_database(tmp_path)
    settings = console_settings(
        SQLITE,
        address,
        telegram_api_base_url=telegram.base_url,
        telegram_bot_token="123456:browser-pay-token",
        plans='[{"id": "club", "title": "Club", "stars": 100, "subscription": true}]',
    )
    try:
        async with running_console(settings) as console, browser_page() as page:
            now = time.time()
            for charge, user, until in (("ch-sub", 51, now + 30 * 86_400.0), ("ch-one", 52, None)):
                payment = Payment(
                    charge,
                    f"tg:{user}",
                    "club",
                    100,
                    "XTR",
                    "p",
                    now,
                    subscription_expires_at=until,
                )
                await console.store.payments.record_payment(payment, Grant("club", 86_400.0))
                telegram.charges[charge] = user
            base = str(console.client.make_url("/admin/")).rstrip("/")
            await page.goto(f"{base}/payments")
            await page.fill("#token", TOKEN)
            await page.click("button[type=submit]")
            await page.click("nav >> text=Payments")
            await expect(page.locator("h1")).to_have_text("Payments")
            await expect(page.locator("form.cancel")).to_have_count(1)
            row = page.locator("table.list tbody tr").filter(has_text="ch-sub")
            await row.locator("form.cancel input[name=confirm]").check()
            async with page.expect_navigation():  # the POST, then its redirect to the list
                await row.locator("form.cancel button[type=submit]").click()
            await expect(page.locator("h1")).to_have_text("Payments")
            assert telegram.subscription_edits == [(51, "ch-sub", True)]
            assert telegram.refunds == []
            assert await console.store.payments.active_plan("tg:51", time.time()) is not None
            entries = await console.store.audit_log(before_id=None, limit=10)
            assert (entries[0].action, entries[0].target) == ("cancel_subscription", "ch-sub")
            await expect(row).to_contain_text("renewal cancelled")
            await expect(page.locator("form.cancel")).to_have_count(0)
            await row.locator("form.resume input[name=confirm]").check()
            async with page.expect_navigation():
                await row.locator("form.resume button[type=submit]").click()
            await expect(row).not_to_contain_text("renewal cancelled")
            await expect(page.locator("form.cancel")).to_have_count(1)
            assert telegram.subscription_edits == [(51, "ch-sub", True), (51, "ch-sub", False)]
    finally:
        await telegram.stop()
