"""The console's dashboard on a real server and store (SQLite and PostgreSQL): the
figures of today, 7 and 30 days as the service counts them, the rounds the completed
consultations used, the last 30 days drawn as SVG on the server (no script, no style
attribute), markup in a model name inert; the workers and inbox section on PostgreSQL
only (its figures: tests/admin/test_admin_workers.py)."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from html import unescape

import pytest

from admin.charts import HEIGHT, WIDTH, chart
from core.domain.bots import BotProfile, NewBot
from core.domain.consultation import Message, Role, Status, Usage
from core.domain.stats import period_of
from core.domain.usage import CallKind, Charge
from tests.admin_harness import Console, console_settings, running_console
from tests.store_contract import StoreKind, make

HOSTILE_MODEL = "<img src=x onerror=alert(1)>"


@pytest.fixture
async def console(kind: StoreKind, database: str) -> AsyncIterator[Console]:
    async with running_console(console_settings(kind, database)) as c:
        yield c


async def seed(console: Console) -> None:
    """Today: two consultations started; one completed by a final answer charged 1000
    tokens in and 100 out on a model named with markup, the other reset."""
    now = time.time()
    day = period_of(now, 1).until_day
    done = make("tg:7", at=now - 1, started_by=7)
    dropped = make("tg:8", at=now - 1, started_by=8)
    await console.store.create(done)
    await console.store.create(dropped)
    await console.store.record_reply(
        done.id,
        Message(Role.ASSISTANT, "final", now),
        expected_round=0,
        current_round=1,
        status=Status.COMPLETE,
        last_activity_at=now,
        charge=Charge(
            day, "tg:7", HOSTILE_MODEL, CallKind.FINAL, Usage(1000, 100), 0.25, True, "tg:7"
        ),
    )
    await console.store.set_status(dropped.id, Status.RESET, at=now)


def cells(html: str, figure: str) -> list[str]:
    row = re.search(rf'<td class="key">{re.escape(figure)}</td>(.*?)</tr>', html, re.S)
    assert row is not None, figure
    return re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))


async def test_the_dashboard_shows_each_periods_figures_and_draws_the_days(
    console: Console,
) -> None:
    await seed(console)
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/")
    assert status == 200
    assert cells(html, "Started") == ["2", "2", "2"]
    assert cells(html, "Completed") == ["1", "1", "1"]
    assert cells(html, "Reset") == ["1", "1", "1"]
    assert cells(html, "Completion rate") == ["50%", "50%", "50%"]
    assert cells(html, "Tokens in / out") == ["1,000 / 100"] * 3
    assert cells(html, "Cost") == ["$0.2500"] * 3
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and HOSTILE_MODEL not in html
    assert html.count('<figure class="chart">') == 3
    assert "<script" not in html and "style=" not in html
    # Today's bars: the last of the 30 slots, a completed and a reset one, the started line.
    assert re.search(r'class="bar-completed"[^>]*><title>[0-9-]+: 1 completed</title>', html)
    assert re.search(r'class="bar-prompt"[^>]*><title>[0-9-]+: 1,000 tokens in</title>', html)
    assert 'class="line-started"' in html


def rounds_table(html: str) -> dict[str, list[tuple[str, str]]]:
    """The rounds table: rounds used → (bar length, text) per period."""
    table = re.search(r'<table class="list figures-table rounds-table">(.*?)</table>', html, re.S)
    assert table is not None
    rows = {}
    for label, body in re.findall(r'<tr><td class="key">([^<]*)</td>(.*?)</tr>', table.group(1)):
        rows[label] = re.findall(
            r'<rect class="bar-completed" width="([0-9.]+)"[^>]*/></svg>'
            r' <span class="share-text">([^<]*)</span>',
            body,
        )
    return rows


async def test_the_rounds_used_are_a_table_with_bars_from_one_round_up(
    console: Console, kind: StoreKind
) -> None:
    """Completed consultations by rounds used, each period's share drawn as an SVG bar:
    one answered at once and one in its third round of three; the rows run from 1 to the
    highest counted, 2 included at zero."""
    await seed(console)
    third = make("tg:9", at=time.time() - 1, started_by=9)
    third.max_rounds = 3
    await console.store.create(third)
    for round_from in range(3):
        await console.store.record_reply(
            third.id,
            Message(Role.ASSISTANT, f"reply {round_from}", time.time()),
            expected_round=round_from,
            current_round=round_from + 1,
            status=Status.COMPLETE if round_from == 2 else Status.ACTIVE,
            last_activity_at=time.time(),
        )
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/")
    assert status == 200
    assert rounds_table(html) == {
        "1": [("50.0", "1 · 50%")] * 3,
        "2": [("0.0", "0")] * 3,
        "3": [("50.0", "1 · 50%")] * 3,
    }
    assert cells(html, "Mean rounds") == ["2.0"] * 3
    assert ("Workers and inbox" in html) is (kind.name == "postgres")


async def test_an_empty_store_shows_dashes_not_errors(console: Console) -> None:
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/")
    assert status == 200
    assert cells(html, "Completion rate") == ["—", "—", "—"]
    assert "No model calls in the last 30 days." in html
    assert "No consultation completed in the last 30 days." in html


def test_every_shape_stays_inside_the_chart_whatever_the_values() -> None:
    days = ["2026-01-01", "2026-01-02", "2026-01-03"]
    for values in ([0, 0, 0], [1, 10**12, 0], [0.0001, 0, 3]):
        drawn = chart("t", days, [("a", "a", values), ("b", "b", values)], ("c", "c", values))
        for bar in drawn.bars:
            assert bar.x >= 0 and bar.x + bar.width <= WIDTH
            assert bar.y >= 0 and bar.y + bar.height <= HEIGHT
        for point in drawn.line.split():
            x, y = map(float, point.split(","))
            assert 0 <= x <= WIDTH and 0 <= y <= HEIGHT
    assert chart("t", [], [("a", "a", [])]).bars == ()


async def seed_bots(console: Console) -> list[int]:
    """Bots 1 (`@desk_bot`, labelled) and 2 (`@law_bot`) stored; today the deployment's bot
    starts one consultation through Telegram and one through the API, bot 1 two through
    Telegram and one through the API (charged 500 tokens in), bot 2 none."""
    now = time.time()
    ids = []
    for telegram_id, username, label in ((111, "desk_bot", "Tax <desk>"), (222, "law_bot", "")):
        new = NewBot(telegram_id, username, "sealed", "WXYZ", label, BotProfile())
        ids.append((await console.store.bots.add_bot(new, at=now)).id)
    desk = ids[0]
    for chat in ("tg:7", "api:s-1", f"tg{desk}:7", f"tg{desk}:8", f"api{desk}:s-2"):
        await console.store.create(make(chat, at=now - 1))
    day = period_of(now, 1).until_day
    charge = Charge(day, f"api{desk}:s-2", "m", CallKind.ROUND, Usage(500, 50), 0.5, True)
    await console.store.add_usage([charge])
    return ids


def by_bot(html: str) -> dict[str, list[str]]:
    """The per-bot table: the bot's name as shown → its cells."""
    table = re.search(r'<table class="list by-bot">(.*?)</table>', html, re.S)
    assert table is not None
    rows = {}
    for name, body in re.findall(r'<tr><td class="key">(.*?)</td>(.*?)</tr>', table.group(1)):
        rows[unescape(re.sub(r"<[^>]+>", "", name))] = re.findall(r"<td[^>]*>([^<]*)</td>", body)
    return rows


async def test_the_dashboard_shows_each_bots_figures_and_the_total(console: Console) -> None:
    """With bots stored, all bots' view has a table of each bot's 30 days (its Telegram
    chats and its API sessions) and all bots'; `?bot=N` shows bot N's figures only (no
    table), `?bot=0` the deployment's bot's; a label with markup is inert."""
    desk, law = await seed_bots(console)
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/")
    assert status == 200
    rows = by_bot(html)
    own, tax, lawyer = (
        "This deployment's bot",
        f"#{desk} @desk_bot (Tax <desk>)",
        f"#{law} @law_bot",
    )
    assert list(rows) == [own, tax, lawyer, "All bots"]
    assert [rows[name][0] for name in rows] == ["2", "3", "0", "5"]  # started
    assert rows[tax][3] == rows["All bots"][3] == "500 / 50"
    assert "Tax <desk>" not in html and "Tax &lt;desk&gt;" in html
    assert cells(html, "Started") == ["5", "5", "5"]
    assert '<strong aria-current="page">All bots</strong>' in html

    status, html = await console.page(f"/admin/?bot={desk}")
    assert status == 200
    assert "by-bot" not in html  # one bot's view reads no other bot's figures
    assert cells(html, "Started") == ["3", "3", "3"]
    assert cells(html, "Tokens in / out") == ["500 / 50"] * 3
    assert f'<strong aria-current="page">#{desk} @desk_bot (Tax &lt;' in html
    assert re.search(r'class="bar-prompt"[^>]*><title>[0-9-]+: 500 tokens in</title>', html)
    status, html = await console.page("/admin/?bot=0")
    assert cells(html, "Started") == ["2", "2", "2"]
    assert cells(html, "Tokens in / out") == ["0 / 0"] * 3
    status, html = await console.page(f"/admin/?bot={law}")
    assert cells(html, "Started") == ["0", "0", "0"]


@pytest.mark.parametrize(
    "query", ["99", "abc", "-1", "01", "1.0", "1&bot=2", "9" * 40, "%EF%BC%91"]
)
async def test_the_dashboard_refuses_a_bot_that_is_not_stored(console: Console, query: str) -> None:
    """A `bot` naming no stored bot (or in no form the page takes) is 404 naming no figure."""
    await seed_bots(console)
    assert await console.sign_in() == 303
    status, html = await console.page(f"/admin/?bot={query}")
    assert status == 404, query
    assert "No such bot" in html and "Started" not in html


async def test_without_stored_bots_the_dashboard_names_no_bot(console: Console) -> None:
    """No bot stored: neither the selector nor the per-bot table is shown."""
    await seed(console)
    assert await console.sign_in() == 303
    _, html = await console.page("/admin/")
    assert "by-bot" not in html and "bot-choice" not in html
