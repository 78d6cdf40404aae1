"""The console in a real browser: Debian's Chromium driven by Playwright against the
real server on 127.0.0.1 — sign in, open the list, filter it, open a transcript, sign
out — with no error in the browser's console (a Content-Security-Policy violation
would be one).

Chromium is `/usr/bin/chromium` (`apt-get install chromium`; Playwright's own browser
download is not used). Without it these tests skip outside CI and fail in CI (`CI` set).
With ADMIN_SCREENSHOTS=1 they save screenshots of the list and a transcript in
docs/images/.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.admin_harness import TOKEN, Console, console_settings, consultation, running_console
from tests.store_contract import STORE_KINDS

CHROMIUM = Path("/usr/bin/chromium")
IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"

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


@pytest.fixture
async def page(console: Console) -> AsyncIterator[Page]:
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
