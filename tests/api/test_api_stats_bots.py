"""`GET /api/stats?bot=N`: the operator's figures of one bot (its scope, 0 the deployment's
own), beside everyone's; a `bot` that names no scope is refused before anything is read."""

from __future__ import annotations

import time
from typing import Any

import pytest

from core.domain.consultation import Usage
from core.domain.usage import Accounting, CallKind, Payer
from tests.api.test_api_ops import check
from tests.api_harness import RunningApi
from tests.store_contract import make

TOKEN = "stats-token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


async def started_in(api: RunningApi, chat: str, person: str, tokens: int) -> None:
    """A consultation started now in `chat` by `person`, charged `tokens` tokens in."""
    now = time.time()
    author = 7 if chat.startswith("tg") else None  # an API session has no Telegram author
    await api.store.create(make(chat, at=now, started_by=author), starter=person)
    charge = Accounting().charge(
        Usage(tokens, 1), model="m", kind=CallKind.ROUND, chat=chat, payer=Payer(person), at=now
    )
    await api.store.add_usage([charge])


async def figures(api: RunningApi, query: str = "") -> dict[str, Any]:
    response = await api.client.get(f"/api/stats{query}", headers=HEADERS)
    body: dict[str, Any] = await response.json()
    assert response.status == 200, body
    return body


@pytest.mark.api_settings(api_token=TOKEN)
async def test_api_stats_of_one_bot_count_its_consultations_people_and_tokens(
    api: RunningApi,
) -> None:
    """The deployment's bot, bot 2, an API user of the deployment's bot and one of bot 2
    each start one: `?bot=2` counts bot 2's (its chat's and its API user's), `?bot=0` the
    deployment's bot's (the API's without `bot` included), no `bot` all four; valid
    against the document."""
    await started_in(api, "tg:5", "tg:7", 10)
    await started_in(api, "tg2:5", "tg2:7", 20)
    await started_in(api, "api:s-1", "api:u-1", 40)
    await started_in(api, "api2:s-2", "api2:u-1", 80)
    document = await (await api.client.get("/api/openapi.json", headers=HEADERS)).json()
    for query, started, tokens in (("?bot=2", 2, 100), ("?bot=0", 2, 50), ("", 4, 150)):
        body = await figures(api, query + ("&" if query else "?") + "days=30")
        check(document, "/api/stats", "get", 200, body)
        for name in ("today", "last7Days", "lastDays"):
            assert body[name]["started"] == started, (query, name)
            assert body[name]["inputTokens"] == tokens, (query, name)
    assert (await figures(api, "?bot=2"))["today"]["people"] == 2
    assert (await figures(api, "?bot=3"))["today"]["started"] == 0


@pytest.mark.api_settings(api_token=TOKEN)
@pytest.mark.parametrize(
    "query",
    ["bot=-1", "bot=abc", "bot=", "bot=02", "bot=2.0", "bot=%EF%BC%92", "bot=1&bot=2",
     "bot=9223372036854775808", "bot=" + "9" * 5000, "bot=%202"],
)  # fmt: skip
async def test_api_stats_refuse_a_bot_that_names_no_scope(api: RunningApi, query: str) -> None:
    """A negative, non-digit, zero-padded, fullwidth, repeated or past-64-bit `bot` is 400
    VALIDATION_ERROR."""
    response = await api.client.get(f"/api/stats?{query}", headers=HEADERS)
    assert response.status in (400, 414), await response.text()
    if response.status == 400:
        assert (await response.json())["code"] == "VALIDATION_ERROR"
