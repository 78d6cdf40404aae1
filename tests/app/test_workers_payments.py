"""One payment in Telegram Stars seen by two real `python -m bot` workers on one PostgreSQL
schema: the same `successful_payment` posted to both workers' webhooks at once — as the
same update, and as two updates carrying the same charge id — is kept once, grants its plan
once (30 days, not 60) and sends one receipt; another person's payment beside it is granted
too. Helpers (processes, webhooks) are in tests/cluster_harness.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import asyncpg

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.cluster_harness import PATH, chat_ids, cluster, free_port, post_update, worker_env
from tests.postgres import postgres_url  # noqa: F401  (fixture)
from tests.waiting import until

DAYS = 30
PLANS = [{"id": "pro", "title": "Pro", "stars": 250, "days": DAYS}]


def receipts(bot_api: FakeBotApi, chat: int) -> list[str]:
    """The receipts the bot sent to `chat` (Telegram took them)."""
    return [
        str(c.params["text"])
        for c in bot_api.calls_of("sendMessage")
        if c.params.get("chat_id") == chat
        and c.result is not None
        and str(c.params["text"]).startswith("Thank you! Pro is yours until ")
    ]


async def books(database_url: str, people: list[str]) -> tuple[list[tuple[str, str]], list[float]]:
    """The payments kept for `people` (charge, person) and each one's plan's end."""
    db = await asyncpg.connect(database_url)
    try:
        paid = await db.fetch(
            "SELECT charge_id, person FROM payments WHERE person = ANY($1::text[])"
            " ORDER BY charge_id",
            people,
        )
        ends = await db.fetch(
            "SELECT ends_at - updated_at FROM person_plans WHERE person = ANY($1::text[])"
            " ORDER BY person",
            people,
        )
    finally:
        await db.close()
    return [(r[0], r[1]) for r in paid], [float(r[0]) for r in ends]


async def test_one_payment_seen_by_two_workers_grants_once(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> None:
    """Posted to both workers at once, as one update and as two: one payment row per
    charge, one grant of 30 days, one receipt per payer."""
    one, two = chat_ids(2)
    ports = [free_port(), free_port()]
    async with cluster(tmp_path) as workers:
        for port in ports:
            env = worker_env(workers.home, bot_api, model_server, postgres_url, port=port)
            await workers.start(env | {"PLANS": json.dumps(PLANS)}, port)
        await workers.running()
        urls = [f"http://127.0.0.1:{port}{PATH}" for port in ports]
        same = bot_api.successful_payment(one, f"plan:pro:tg:{one}", 250, charge_id=f"ch-{one}")
        first = bot_api.successful_payment(two, f"plan:pro:tg:{two}", 250, charge_id=f"ch-{two}")
        again = dict(first, update_id=bot_api.next_update_id())  # the same charge, anew
        async with aiohttp.ClientSession() as http:
            statuses = await asyncio.gather(
                post_update(http, urls[0], same),
                post_update(http, urls[1], same),
                post_update(http, urls[0], first),
                post_update(http, urls[1], again),
            )
        assert statuses == [200, 200, 200, 200]
        await until(lambda: receipts(bot_api, one) and receipts(bot_api, two), "both receipts")
        people = [f"tg:{one}", f"tg:{two}"]
        await asyncio.sleep(1.0)  # time for a second grant or receipt, were there one
        assert "Traceback" not in workers.logs()
    assert len(receipts(bot_api, one)) == 1 and len(receipts(bot_api, two)) == 1
    kept, lengths = await books(postgres_url, people)
    assert kept == sorted([(f"ch-{one}", f"tg:{one}"), (f"ch-{two}", f"tg:{two}")])
    assert [round(length / 86_400, 3) for length in lengths] == [DAYS, DAYS]
