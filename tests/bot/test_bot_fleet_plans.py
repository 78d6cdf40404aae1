"""Plans per bot: a stored bot sells the plans its profile sets (else the deployment's PLANS)
with its own token — /plans, the invoice, the pre-checkout answer, the receipt and /refund
are its own — and a plan bought there gives its limits and models in that bot only. Real PTB
Applications against one fake Bot API serving every token, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from core.domain.bots import parse_profile
from fakes.bot_api import TOKEN, Call, FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot.test_bot_fleet import FIRST, SECOND, USER, deployment, fakes, replied, running
from tests.bot_harness import bot_settings
from tests.store_contract import StoreKind

ADMIN = 900
PLANS = [{"id": "pro", "title": "Pro", "stars": 250, "days": 30}]
GOLD = [{"id": "gold", "title": "Gold", "stars": 75, "days": 7, "models": ["model-b"]}]


def settings_for(kind: StoreKind, database: str, api: FakeBotApi, model: FakeModelServer) -> Any:
    overrides: dict[str, Any] = {
        "secret_key": "fleet-test-secret-key-0123456789",
        "llm_models": "test-model",
        "plans": json.dumps(PLANS),
        "admin_user_ids": str(ADMIN),
    }
    if kind.name == "sqlite":
        return bot_settings(Path(database), api, model, **overrides)
    return bot_settings(Path("unused.sqlite3"), api, model, database_url=database, **overrides)


async def said(api: FakeBotApi, token: str, chat: int, text: str) -> Call:
    """Send `text` to `token`'s bot; the message it answers with."""
    before = len([c for c in api.calls if replied(c, token, chat)])
    api.push_update(api.text_message(chat, text, user_id=chat), token=token)
    return await api.wait_for(lambda c: replied(c, token, chat), 10, count=before + 1)


async def test_a_stored_bot_sells_its_own_plans_with_its_own_token(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """Bot 1 sells Gold (its own plans), bot 2 the deployment's Pro. In bot 1: /plans lists
    Gold only, Buy sends its invoice with bot 1's token naming bot 1's person, a checkout
    for the deployment's Pro is refused, the payment grants Gold (its model is then called
    there, not in the deployment's bot), and /refund asks Telegram with bot 1's token."""
    async with fakes() as api:
        settings = settings_for(kind, database, api, model_server)
        async with deployment(settings, api) as process:
            first = await process.add(FIRST, parse_profile({"plans": GOLD}))
            second = await process.add(SECOND, parse_profile({}))
            await running(process, first.id, second.id)
            person = f"tg{first.id}:{USER}"

            listing = await said(api, FIRST, USER, "/plans")
            assert "Gold — 75 ⭐ for 7 days" in listing.params["text"]
            assert "Pro" not in listing.params["text"]
            other = await said(api, SECOND, USER, "/plans")
            assert "Pro — 250 ⭐ for 30 days" in other.params["text"]
            assert "Gold" not in other.params["text"]

            press = api.callback_query(USER, USER, "buy:gold", listing.result["message_id"])
            api.push_update(press, token=FIRST)
            invoice = await api.wait_for(lambda c: c.method == "sendInvoice" and c.token == FIRST)
            assert invoice.status == 200
            payload = invoice.params["payload"]
            assert payload == f"plan:gold:{person}"

            for paying, amount, ok in ((f"plan:pro:{person}", 250, False), (payload, 75, True)):
                query = api.push_update(api.pre_checkout_query(USER, paying, amount), token=FIRST)
                query_id = query["pre_checkout_query"]["id"]
                answer = await api.wait_for(
                    lambda c, q=query_id: (
                        c.method == "answerPreCheckoutQuery"
                        and c.params.get("pre_checkout_query_id") == q
                    )
                )
                assert answer.token == FIRST and api.checkout_answers[query_id][0] is ok

            before = len([c for c in api.calls if replied(c, FIRST, USER)])
            api.push_update(
                api.successful_payment(USER, payload, 75, charge_id="ch-gold"), token=FIRST
            )
            receipt = await api.wait_for(lambda c: replied(c, FIRST, USER), 10, count=before + 1)
            assert receipt.params["text"].startswith("Thank you! Gold is yours until ")
            payments = process.runtime.store.payments
            assert await payments.active_plan(person, time.time()) is not None
            assert await payments.active_plan(f"tg:{USER}", time.time()) is None
            metrics = process.runtime.metrics.render()[0].decode()
            assert f'consult_payments_total{{bot="{first.id}",plan="gold"}} 1.0' in metrics
            assert f'consult_payment_stars_total{{bot="{first.id}",plan="gold"}} 75.0' in metrics
            assert 'bot="0",plan="gold"' not in metrics

            await said(api, FIRST, USER, "Which database?")
            assert model_server.requests[-1]["model"] == "model-b"
            await said(api, TOKEN, USER, "Which database?")
            assert model_server.requests[-1]["model"] == "test-model"

            done = await said(api, FIRST, ADMIN, "/refund ch-gold")
            assert done.params["text"] == f"Refunded 75 ⭐ to {person}; their plan is revoked."
            assert api.payment_tokens == [("refundStarPayment", "ch-gold", FIRST)]
            assert await payments.active_plan(person, time.time()) is None
            metrics = process.runtime.metrics.render()[0].decode()
            assert f'consult_refunds_total{{bot="{first.id}"}} 1.0' in metrics
            assert 'consult_refunds_total{bot="0"}' not in metrics


async def test_a_bot_set_to_sell_no_plans_has_no_plans(
    kind: StoreKind, database: str, model_server: FakeModelServer
) -> None:
    """`plans=[]` sells nothing in that bot: /plans says so, whatever PLANS the deployment
    has."""
    async with fakes() as api:
        settings = settings_for(kind, database, api, model_server)
        async with deployment(settings, api) as process:
            bot = await process.add(FIRST, parse_profile({"plans": []}))
            await running(process, bot.id)
            reply = await said(api, FIRST, USER, "/plans")
            assert "Pro" not in reply.params["text"]
            assert process.fleet.running[bot.id].sales is None
