"""`GET /api/stats` with plans sold in Stars: `sales` gives the Stars per UTC day (refunds
apart) and the plans active now, over the last 7 days or `days`, as the OpenAPI document
says; without plans there is no `sales`."""

from __future__ import annotations

import json
import time

import pytest

from core.domain.payments import Grant, Payment
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
