"""`GET /api/stats` with plans sold in Stars: `sales` gives the Stars per UTC day (refunds
apart) and the plans active now, over the last 7 days or `days`, as the OpenAPI document
says; a stored bot selling its own plans, or payments kept, show `sales` without PLANS, and
`?bot=N` gives that bot's; with no plans and no payment there is no `sales`."""

from __future__ import annotations

import json
import time

import pytest

from core.domain.bots import BotProfile, NewBot
from core.domain.payments import Grant, Payment
from core.domain.plans import parse_plans
from tests.api.test_api_ops import check
from tests.api_harness import RunningApi

TOKEN = "secret-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
PLANS = json.dumps([{"id": "pro", "title": "Pro", "stars": 250}])


@pytest.mark.api_settings(api_token=TOKEN, plans=PLANS)
async def test_sales_are_the_stars_by_day_and_the_plans_active(api: RunningApi) -> None:
    """Two payments today, one refunded: 250 Stars kept, one plan active; valid per the schema."""
    now = time.time()
    for charge, person in (("c1", "tg:1"), ("c2", "tg:2")):
        payment = Payment(charge, person, "pro", 250, "XTR", f"plan:pro:{person}", now)
        await api.store.payments.record_payment(payment, Grant("pro", 86_400.0))
    await api.store.payments.refund("c2", at=now)
    response = await api.client.get("/api/stats?days=30", headers=HEADERS)
    assert response.status == 200, await response.text()
    found = await response.json()
    document = await (await api.client.get("/api/openapi.json", headers=HEADERS)).json()
    check(document, "/api/stats", "get", 200, found)
    sales = found["sales"]
    today = time.strftime("%Y-%m-%d", time.gmtime(now))
    assert (sales["stars"], sales["activePlans"], sales["until"]) == (250, 1, today)
    assert sales["days"] == [{"day": today, "payments": 2, "stars": 500, "refundedStars": 250}]
    assert found["lastDays"]["since"] == sales["since"]


@pytest.mark.api_settings(api_token=TOKEN)
async def test_without_plans_there_is_no_sales(api: RunningApi) -> None:
    """No PLANS: the answer has no `sales` field."""
    response = await api.client.get("/api/stats", headers=HEADERS)
    assert response.status == 200 and "sales" not in await response.json()


@pytest.mark.api_settings(api_token=TOKEN)
async def test_a_stored_bot_selling_plans_shows_sales_and_each_bots_own(api: RunningApi) -> None:
    """No PLANS, a stored bot sells its own: `sales` is there (0 Stars before any payment);
    after payments in it and in the deployment's bot, `?bot=N` counts bot N's only."""
    plans = parse_plans(json.dumps([{"id": "gold", "title": "Gold", "stars": 75}]), None)
    new = NewBot(222, "shop_bot", "sealed", "tail", "", BotProfile(plans=plans))
    bot = await api.store.bots.add_bot(new, at=time.time())
    first = await (await api.client.get("/api/stats", headers=HEADERS)).json()
    assert (first["sales"]["stars"], first["sales"]["activePlans"], first["sales"]["days"]) == (
        0,
        0,
        [],
    )
    now = time.time()
    for charge, person, stars in (("g1", f"tg{bot.id}:1", 75), ("g2", "tg:2", 40)):
        payment = Payment(charge, person, "gold", stars, "XTR", "p", now)
        await api.store.payments.record_payment(payment, Grant("gold", 86_400.0))
    everyone = await (await api.client.get("/api/stats", headers=HEADERS)).json()
    assert (everyone["sales"]["stars"], everyone["sales"]["activePlans"]) == (115, 2)
    own = await (await api.client.get(f"/api/stats?bot={bot.id}", headers=HEADERS)).json()
    assert (own["sales"]["stars"], own["sales"]["activePlans"]) == (75, 1)
    main = await (await api.client.get("/api/stats?bot=0", headers=HEADERS)).json()
    assert (main["sales"]["stars"], main["sales"]["activePlans"]) == (40, 1)
    other = await api.client.get(f"/api/stats?bot={bot.id + 1}", headers=HEADERS)
    assert other.status == 200 and "sales" not in await other.json()  # sells nothing, no payment


@pytest.mark.api_settings(api_token=TOKEN)
async def test_payments_kept_show_sales_when_nothing_is_sold_any_more(api: RunningApi) -> None:
    """No bot sells plans, but a plan bought earlier is active: `sales` shows it."""
    payment = Payment("old", "tg:3", "pro", 250, "XTR", "p", time.time() - 40 * 86_400.0)
    await api.store.payments.record_payment(payment, Grant("pro", 50 * 86_400.0))
    found = await (await api.client.get("/api/stats", headers=HEADERS)).json()
    assert (found["sales"]["stars"], found["sales"]["activePlans"]) == (0, 1)
