"""Tools in the console, on a real server and store (SQLite and PostgreSQL). The
dashboard: each configured tool server with its state, its tools and its last error, read
anew for each view; markup in an error is inert; a failing source leaves the section
saying so and the rest of the page shown; without tool servers there is no section; in a
real browser too (Debian's Chromium, skipped without it as
tests/admin/test_admin_browser.py is). A consultation's page: the tools each reply called,
with arguments, result or error and time, markup inert."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from core.domain.consultation import Role, Status
from core.domain.tools import ToolFailure, ToolServerStatus, ToolUse
from tests.admin_harness import TOKEN, console_settings, consultation, running_console
from tests.store_contract import STORE_KINDS, StoreKind

HOSTILE = "<script>alert(1)</script> refused"
CHROMIUM = Path("/usr/bin/chromium")
HAS_CHROMIUM = CHROMIUM.exists()


def rows(html: str) -> list[list[str]]:
    section = html.split("<h2>Tool servers</h2>", 1)[1].split("<h2>", 1)[0]
    return [
        re.findall(r"<td[^>]*>([^<]*)</td>", row)
        for row in re.findall(r"<tr>(.*?)</tr>", section, re.S)
        if "<td" in row
    ]


async def test_the_dashboard_lists_each_tool_server(kind: StoreKind, database: str) -> None:
    statuses = [ToolServerStatus("time", "ready", 2)]
    settings = console_settings(kind, database)
    async with running_console(settings, tool_statuses=lambda: tuple(statuses)) as console:
        assert await console.sign_in() == 303
        _, first = await console.page("/admin/")
        statuses.append(ToolServerStatus("docs", "failed", 0, HOSTILE))
        status, second = await console.page("/admin/")
    assert status == 200
    assert rows(first) == [["time", "ready", "2", "—"]]
    assert rows(second) == [
        ["time", "ready", "2", "—"],
        ["docs", "failed", "0", "&lt;script&gt;alert(1)&lt;/script&gt; refused"],
    ]
    assert "1 of 2" in second and HOSTILE not in second and "<script" not in second
    assert "Tokens in / out" in second  # the rest of the page is there


async def test_a_failing_source_says_so_and_no_servers_show_nothing(
    kind: StoreKind, database: str
) -> None:
    def broken() -> Sequence[ToolServerStatus]:
        raise RuntimeError("toolbox gone")

    async with running_console(console_settings(kind, database), tool_statuses=broken) as console:
        await console.sign_in()
        status, html = await console.page("/admin/")
    assert status == 200
    assert "<h2>Tool servers</h2>" in html and "Could not be read: toolbox gone" in html
    assert "Completion rate" in html

    async with running_console(console_settings(kind, database)) as console:
        await console.sign_in()
        _, html = await console.page("/admin/")
    assert "Tool servers" not in html


@pytest.mark.timeout(120)
async def test_the_tool_servers_in_a_real_browser(tmp_path: Path) -> None:
    """The section shows in Chromium with no error in its console."""
    if not HAS_CHROMIUM:
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium", pytrace=False)
        pytest.skip(f"no {CHROMIUM}: browser tests skipped")
    from playwright.async_api import async_playwright, expect

    sqlite = STORE_KINDS[0]
    address = await sqlite.new_database(tmp_path)
    statuses = (ToolServerStatus("time", "ready", 2), ToolServerStatus("docs", "failed", 0, "gone"))
    async with (
        running_console(console_settings(sqlite, address), tool_statuses=lambda: statuses) as c,
        async_playwright() as p,
    ):
        browser = await p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        page = await (await browser.new_context(viewport={"width": 1100, "height": 800})).new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        base = str(c.client.make_url("/admin/")).rstrip("/")
        await page.goto(f"{base}/")
        await page.fill("#token", TOKEN)
        await page.click("button[type=submit]")
        await expect(page.locator("h2", has_text="Tool servers")).to_be_visible()
        await expect(page.locator("td", has_text="failed")).to_be_visible()
        await expect(page.locator("td", has_text="gone")).to_be_visible()
        await browser.close()
    assert errors == [], errors


async def test_a_consultations_page_shows_the_tools_each_reply_called(
    kind: StoreKind, database: str
) -> None:
    """Under the round that called it and under the final answer: the tool, the
    arguments as written, the result (markup as text) or the failure and its error."""
    found = consultation()
    asked = next(m for m in found.messages if m.role is Role.ASSISTANT)
    asked.tool_uses = (
        ToolUse("time__now", "time", "now", '{"tz": "<b>UTC</b>"}', "<i>03:00</i>", ms=12),
    )
    final = found.messages[-1]
    assert final.role is Role.ASSISTANT and found.status is Status.COMPLETE
    final.tool_uses = (
        ToolUse(
            "docs__search",
            "docs",
            "search",
            "{}",
            error="<script>x</script> gone",
            failure=ToolFailure.UNAVAILABLE,
            ms=20_000,
        ),
    )
    async with running_console(console_settings(kind, database)) as console:
        await console.store.create(found)
        await console.sign_in()
        status, html = await console.page(f"/admin/consultations/{found.id}")
    assert status == 200
    assert html.count("<h3>Looked up</h3>") == 2
    round_part, final_part = html.split("<h2>Final answer</h2>")
    assert "<strong>time · now</strong>" in round_part
    assert "<code>{&#34;tz&#34;: &#34;&lt;b&gt;UTC&lt;/b&gt;&#34;}</code>" in round_part
    assert "&lt;i&gt;03:00&lt;/i&gt;" in round_part and "12 ms" in round_part
    assert "<strong>docs · search</strong>" in final_part
    assert "Failed (unavailable): &lt;script&gt;x&lt;/script&gt; gone" in final_part
    assert "<script>x" not in html and "<i>03:00" not in html
