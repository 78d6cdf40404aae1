"""Plans in Telegram Stars, end to end: a person out of quota is offered /plans, buys a plan
(invoice in XTR, pre-checkout accepted, payment kept once) and is answered again; forged,
mispriced, wrong-currency, other-payer and unknown-plan checkouts are refused with a reason;
a payment delivered twice grants once; an operator's /refund revokes the plan; a
subscription's renewal extends it.

The real bot (python-telegram-bot) runs against the fake Bot API and the fake model server,
on a SQLite file (the books' concurrency on both stores: tests/contract/test_payments_store.py)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

from core.domain.bots import BotProfile, NewBot
from core.domain.payments import Grant, Payment
from core.domain.plans import parse_plans
from fakes.bot_api import Call, FakeBotApi
from fakes.model_server import FakeModelServer
from tests.bot_harness import RunningBot, bot_settings, buttons, running_bot, sent, wait_sent

USER = 501
OTHER = 502
ADMIN = 900
DAY = 86_400
PLANS = [
    {
        "id": "pro",
        "title": {"en": "Pro", "ru": "Про"},
        "description": "Five consultations a day",
        "stars": 250,
        "days": 30,
        "limits": {"daily_consultations": 5},
    },
    {
        "id": "club",
        "title": "Club",
        "stars": 100,
        "subscription": True,
        "limits": {"daily_consultations": 9},
    },
]

pytestmark = pytest.mark.bot_settings(
    user_daily_consultation_limit=1,
    admin_user_ids=str(ADMIN),
    plans=json.dumps(PLANS),
    payment_support_text="Write to support@example.com",
)


async def say(bot: RunningBot, chat: int, text: str, **kwargs: Any) -> Call:
    """Send `text` and return the one message it gets back."""
    before = len(sent(bot, chat))
    await bot.send(chat, text, **kwargs)
    await wait_sent(bot, chat, before + 1)
    return sent(bot, chat)[before]


async def out_of_quota(bot: RunningBot, chat: int = USER) -> None:
    """Use the one consultation of the day, then end it."""
    bot.model.enqueue("Which load?")
    assert "Which load?" in (await say(bot, chat, "Pick a database")).params["text"]
    await say(bot, chat, "/reset")


async def checkout(
    bot: RunningBot, user: int, payload: str, amount: int, **kwargs: Any
) -> tuple[bool, str | None]:
    """Push a pre-checkout query and return the bot's answer (ok, reason)."""
    update = bot.api.push_update(bot.api.pre_checkout_query(user, payload, amount, **kwargs))
    query_id = update["pre_checkout_query"]["id"]
    await bot.api.wait_for(
        lambda c: (
            c.method == "answerPreCheckoutQuery"
            and c.params.get("pre_checkout_query_id") == query_id
        )
    )
    return bot.api.checkout_answers[query_id]


async def pay(bot: RunningBot, user: int, payload: str, amount: int, **kwargs: Any) -> Call:
    """Push a successful payment and return the bot's next message in the payer's chat."""
    before = len(sent(bot, user))
    bot.api.push_update(bot.api.successful_payment(user, payload, amount, **kwargs))
    await wait_sent(bot, user, before + 1)
    return sent(bot, user)[before]


async def test_a_person_out_of_quota_buys_a_plan_and_is_answered_again(bot: RunningBot) -> None:
    """Refused and offered /plans; /plans lists Buy buttons; the press sends an invoice in
    Stars; the checkout is accepted; the receipt names the plan; the next question is
    answered."""
    await out_of_quota(bot)
    refused = await say(bot, USER, "Another question")
    assert "For more, see /plans." in refused.params["text"]
    listing = await say(bot, USER, "/plans")
    assert "Pro — 250 ⭐ for 30 days" in listing.params["text"]
    assert "Club — 100 ⭐ every 30 days (a subscription)" in listing.params["text"]
    assert "You have no plan" in listing.params["text"]
    assert buttons(listing) == ["buy:pro", "buy:club"]
    bot.api.push_update(bot.api.callback_query(USER, USER, "buy:pro", listing.result["message_id"]))
    invoice = await bot.api.wait_for("sendInvoice")
    params = invoice.params
    assert (params["currency"], params["title"], params["payload"]) == (
        "XTR",
        "Pro",
        f"plan:pro:tg:{USER}",
    )
    assert params["prices"] == [{"label": "Pro", "amount": 250}]
    assert params.get("provider_token") in (None, "")
    assert invoice.status == 200
    assert await checkout(bot, USER, params["payload"], 250) == (True, None)
    receipt = await pay(bot, USER, params["payload"], 250, charge_id="ch-pro-1")
    assert receipt.params["text"].startswith("Thank you! Pro is yours until ")
    assert "ch-pro-1" in receipt.params["text"]
    bot.model.enqueue("Which size?")
    assert "Which size?" in (await say(bot, USER, "Another question")).params["text"]
    listing = await say(bot, USER, "/plans")
    assert "Your plan: Pro, until " in listing.params["text"]
    metrics = bot.runtime.metrics.render()[0].decode()
    assert 'consult_payments_total{bot="0",plan="pro"} 1.0' in metrics
    assert 'consult_payment_stars_total{bot="0",plan="pro"} 250.0' in metrics


@pytest.mark.parametrize(
    ("payer", "payload", "amount", "currency", "reason"),
    [
        (USER, "plan:pro:tg:501:x", 250, "XTR", "This invoice was not made for you by this bot"),
        (USER, '{"plan": "pro"}', 250, "XTR", "This invoice was not made for you by this bot"),
        (USER, "plan:pro:tg:501", 1, "XTR", "The price of this plan has changed"),
        (USER, "plan:pro:tg:501", 250, "USD", "Plans are paid in Telegram Stars only."),
        (OTHER, "plan:pro:tg:501", 250, "XTR", "This invoice was made for someone else"),
        (USER, "plan:gold:tg:501", 250, "XTR", "This plan is no longer on sale"),
    ],
)
async def test_a_wrong_checkout_is_refused_with_its_reason(
    bot: RunningBot, payer: int, payload: str, amount: int, currency: str, reason: str
) -> None:
    """Forged payload, wrong amount, wrong currency, another payer, unknown plan: ok False
    with the reason, and nothing is kept."""
    ok, text = await checkout(bot, payer, payload, amount, currency=currency)
    assert not ok and text is not None and text.startswith(reason)
    assert await bot.runtime.store.payments.payments() == []
    metrics = bot.runtime.metrics.render()[0].decode()
    assert "consult_checkouts_refused_total{reason=" in metrics


async def test_the_refusal_reason_is_in_the_payers_language(bot: RunningBot) -> None:
    """A Russian payer reads why in Russian."""
    ok, text = await checkout(bot, USER, "plan:pro:tg:501", 1, language_code="ru")
    assert not ok and text is not None and text.startswith("Цена этого тарифа изменилась")


async def test_a_payment_delivered_twice_grants_once(bot: RunningBot) -> None:
    """The same charge seen again (another update) is kept once, extends nothing and sends
    no second receipt."""
    payload = f"plan:pro:tg:{USER}"
    first = bot.api.successful_payment(USER, payload, 250, charge_id="ch-twice")
    await pay(bot, USER, payload, 250, charge_id="ch-twice")
    plan = await bot.runtime.store.payments.active_plan(f"tg:{USER}", time.time())
    assert plan is not None
    again = dict(first, update_id=bot.api.next_update_id())
    bot.api.push_update(again)
    listing = await say(bot, USER, "/plans")  # handled after the repeat: one chat, in order
    assert "Your plan: Pro" in listing.params["text"]
    receipts = [c for c in sent(bot, USER) if c.params["text"].startswith("Thank you!")]
    assert len(receipts) == 1
    assert len(await bot.runtime.store.payments.payments()) == 1
    assert await bot.runtime.store.payments.active_plan(f"tg:{USER}", time.time()) == plan


async def test_a_payment_for_another_buyer_is_kept_but_grants_nothing(bot: RunningBot) -> None:
    """A payment whose payload names another buyer is kept (for a refund) and grants nothing."""
    reply = await pay(bot, OTHER, f"plan:pro:tg:{USER}", 250, charge_id="ch-odd")
    assert "matches no plan on sale" in reply.params["text"] and "ch-odd" in reply.params["text"]
    (kept,) = await bot.runtime.store.payments.payments()
    assert (kept.charge_id, kept.person) == ("ch-odd", f"tg:{OTHER}")
    assert await bot.runtime.store.payments.active_plan(f"tg:{OTHER}", time.time()) is None


async def test_an_operators_refund_revokes_the_plan(bot: RunningBot) -> None:
    """/refund <charge> refunds through Telegram and revokes the plan; a second refund and
    anyone else's /refund change nothing."""
    await out_of_quota(bot)
    await pay(bot, USER, f"plan:pro:tg:{USER}", 250, charge_id="ch-back")
    denied = await say(bot, USER, "/refund ch-back")
    assert denied.params["text"] == "Sorry, this bot is not available here."
    done = await say(bot, ADMIN, "/refund ch-back")
    assert done.params["text"] == f"Refunded 250 ⭐ to tg:{USER}; their plan is revoked."
    assert bot.api.refunds == [(USER, "ch-back")]
    assert await bot.runtime.store.payments.active_plan(f"tg:{USER}", time.time()) is None
    assert 'consult_refunds_total{bot="0"} 1.0' in bot.runtime.metrics.render()[0].decode()
    refused = await say(bot, USER, "A question after the refund")
    assert "For more, see /plans." in refused.params["text"]
    again = await say(bot, ADMIN, "/refund ch-back")
    assert again.params["text"] == "No such payment, or it was refunded already."
    usage = await say(bot, ADMIN, "/refund")
    assert usage.params["text"] == "Usage: /refund <payment id>"
    assert bot.api.refunds == [(USER, "ch-back")]


async def test_a_subscription_is_a_link_and_its_renewal_extends_it(bot: RunningBot) -> None:
    """A subscription plan's press answers a 30-day invoice link; the first payment runs to
    its expiration, a renewal (is_recurring) to the next one; refunding it cancels it."""
    listing = await say(bot, USER, "/plans")
    before = len(sent(bot, USER))
    bot.api.push_update(
        bot.api.callback_query(USER, USER, "buy:club", listing.result["message_id"])
    )
    offer = (await wait_sent(bot, USER, before + 1))[-1]
    assert offer == "Club: 100 ⭐ every 30 days until you cancel it."
    (link,) = bot.api.calls_of("createInvoiceLink")
    assert link.params["subscription_period"] == 2592000 and link.params["currency"] == "XTR"
    (button,) = sent(bot, USER)[-1].params["reply_markup"]["inline_keyboard"][0]
    assert button["url"] == bot.api.invoice_links[0]
    payload = link.params["payload"]
    now = int(time.time())
    first = await pay(
        bot,
        USER,
        payload,
        100,
        charge_id="sub-1",
        is_first_recurring=True,
        subscription_expiration_date=now + 30 * DAY,
    )
    assert first.params["text"].startswith("Thank you! Club is yours until ")
    await pay(
        bot,
        USER,
        payload,
        100,
        charge_id="sub-2",
        is_recurring=True,
        subscription_expiration_date=now + 60 * DAY,
    )
    plan = await bot.runtime.store.payments.active_plan(f"tg:{USER}", time.time())
    assert plan is not None and (plan.plan_id, plan.ends_at) == ("club", now + 60 * DAY)
    done = await say(bot, ADMIN, "/refund sub-2")
    assert done.params["text"] == f"Refunded 100 ⭐ to tg:{USER}; their plan is revoked."
    assert bot.api.refunds == [(USER, "sub-2")]
    assert bot.api.subscription_edits == [(USER, "sub-2", True)]


async def test_support_and_terms_answer_what_the_operator_set(bot: RunningBot) -> None:
    """/paysupport answers PAYMENT_SUPPORT_TEXT; /terms without PAYMENT_TERMS_TEXT says so."""
    assert (await say(bot, USER, "/paysupport")).params["text"] == "Write to support@example.com"
    assert (await say(bot, USER, "/terms")).params["text"] == "No terms are set for payments here."


async def test_stats_show_the_stars_by_day_and_the_plans_active(bot: RunningBot) -> None:
    """An operator's /stats ends with the week's Stars kept, day by day, and the plans active."""
    await pay(bot, USER, f"plan:pro:tg:{USER}", 250, charge_id="ch-stats")
    text = (await say(bot, ADMIN, "/stats")).params["text"]
    assert "Telegram Stars, last 7 days: 250 ⭐ kept from 1 payments; plans active now: 1" in text
    (kept,) = await bot.runtime.store.payments.payments()
    assert f"{time.strftime('%Y-%m-%d', time.gmtime(kept.created_at))}: 250 ⭐" in text


@pytest.mark.bot_settings(admin_user_ids=str(ADMIN), plans="")
async def test_stats_show_a_stored_bots_sales_without_plans(bot: RunningBot) -> None:
    """No PLANS, but a stored bot sells its own: the deployment's bot's /stats (everyone's
    figures) ends with the Stars; with no seller and no payment it has no such line."""
    assert "Telegram Stars" not in (await say(bot, ADMIN, "/stats")).params["text"]
    plans = parse_plans(json.dumps([{"id": "gold", "title": "Gold", "stars": 75}]), None)
    new = NewBot(222, "shop_bot", "sealed", "tail", "", BotProfile(plans=plans))
    stored = await bot.runtime.store.bots.add_bot(new, at=time.time())
    text = (await say(bot, ADMIN, "/stats")).params["text"]
    assert "Telegram Stars, last 7 days: 0 ⭐ kept from 0 payments; plans active now: 0" in text
    person = f"tg{stored.id}:7"
    payment = Payment("gold-1", person, "gold", 75, "XTR", "p", time.time())
    await bot.runtime.store.payments.record_payment(payment, Grant("gold", DAY))
    text = (await say(bot, ADMIN, "/stats")).params["text"]
    assert "Telegram Stars, last 7 days: 75 ⭐ kept from 1 payments; plans active now: 1" in text


async def test_a_blocked_person_cannot_pay(bot: RunningBot) -> None:
    """A person an operator blocked is refused at pre-checkout, whatever the invoice."""
    from core.domain.audit import AuditEntry

    person = f"tg:{USER}"
    audit = AuditEntry(time.time(), "test", "block", person)
    await bot.runtime.store.set_blocked(person, True, at=time.time(), audit=audit)
    bot.runtime.engine.blocks.refresh(person)
    ok, text = await checkout(bot, USER, f"plan:pro:{person}", 250)
    assert not ok and text == "Sorry, you cannot buy plans here."


@pytest.mark.bot_settings(plans=json.dumps(PLANS), allowed_user_ids=str(OTHER))
async def test_someone_not_on_the_allow_list_cannot_pay(bot: RunningBot) -> None:
    """With ALLOWED_USER_IDS, a stranger's checkout is refused; a listed user's goes ahead."""
    ok, text = await checkout(bot, USER, f"plan:pro:tg:{USER}", 250)
    assert not ok and text == "Sorry, you cannot buy plans here."
    assert await checkout(bot, OTHER, f"plan:pro:tg:{OTHER}", 250) == (True, None)


async def test_an_oversized_payment_update_is_kept_bounded(bot: RunningBot) -> None:
    """A payment with a huge payload, charge id and currency is kept cut to size and grants
    nothing; the receipt says so."""
    reply = await pay(bot, USER, "p" * 100_000, 250, charge_id="c" * 5000, currency="X" * 500)
    assert "matches no plan on sale" in reply.params["text"]
    (kept,) = await bot.runtime.store.payments.payments()
    assert (len(kept.charge_id), len(kept.payload), len(kept.currency)) == (256, 256, 8)
    assert await bot.runtime.store.payments.active_plan(f"tg:{USER}", time.time()) is None


async def test_a_plan_bought_in_bot_two_is_bot_twos(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> None:
    """In the bot of scope 2 the invoice names tg2:<id>, the checkout is accepted from that
    user, and the plan is held by bot 2's person, not the deployment's bot's."""
    settings = bot_settings(
        tmp_path / "bot.sqlite3", bot_api, model_server, plans=json.dumps(PLANS)
    )
    config = dataclasses.replace(settings.bot_config(), scope=2)
    async with running_bot(settings, bot_api, model_server, config=config) as bot:
        listing = await say(bot, USER, "/plans")
        bot.api.push_update(
            bot.api.callback_query(USER, USER, "buy:pro", listing.result["message_id"])
        )
        invoice = await bot.api.wait_for("sendInvoice")
        payload = invoice.params["payload"]
        assert payload == f"plan:pro:tg2:{USER}"
        assert await checkout(bot, USER, payload, 250) == (True, None)
        assert (await checkout(bot, USER, f"plan:pro:tg:{USER}", 250))[0] is False
        await pay(bot, USER, payload, 250, charge_id="ch-two")
        payments = bot.runtime.store.payments
        assert await payments.active_plan(f"tg2:{USER}", time.time()) is not None
        assert await payments.active_plan(f"tg:{USER}", time.time()) is None


async def test_an_operator_cancels_a_subscription_and_the_plan_runs_to_its_end(
    bot: RunningBot,
) -> None:
    """/cancelsub <charge>: Telegram is asked editUserStarSubscription (is_canceled) and
    nothing is refunded; the plan stays until its end; /resumesub allows it again
    (is_canceled false). Anyone else, a one-time plan's payment, an unknown id, no id and a
    charge Telegram does not know change nothing."""
    now = int(time.time())
    payload = f"plan:club:tg:{USER}"
    await pay(bot, USER, payload, 100, charge_id="sub-c", subscription_expiration_date=now + DAY)
    await pay(bot, USER, f"plan:pro:tg:{USER}", 250, charge_id="once-c")
    denied = await say(bot, USER, "/cancelsub sub-c")
    assert denied.params["text"] == "Sorry, this bot is not available here."
    usage = await say(bot, ADMIN, "/cancelsub")
    assert usage.params["text"] == "Usage: /cancelsub <payment id>"
    for charge in ("once-c", "no-such-charge"):
        unknown = await say(bot, ADMIN, f"/cancelsub {charge}")
        assert unknown.params["text"] == (
            "No subscription with this payment id, or it was refunded."
        )
    assert bot.api.subscription_edits == []
    done = await say(bot, ADMIN, "/cancelsub sub-c")
    plan = await bot.runtime.store.payments.active_plan(f"tg:{USER}", time.time())
    assert plan is not None and plan.plan_id == "pro"  # the later payment's: nothing revoked
    ends = time.strftime("%Y-%m-%d %H:%M", time.gmtime(plan.ends_at))
    assert done.params["text"] == (
        f"Subscription cancelled for tg:{USER}: their plan runs until {ends} UTC and is not "
        "renewed."
    )
    assert bot.api.subscription_edits == [(USER, "sub-c", True)]
    assert bot.api.refunds == []
    (payment,) = [p for p in await bot.runtime.store.payments.payments() if p.charge_id == "sub-c"]
    assert payment.refunded_at is None
    resumed = await say(bot, ADMIN, "/resumesub sub-c")
    assert resumed.params["text"] == (
        f"tg:{USER} may renew the subscription again; their plan runs until {ends} UTC."
    )
    assert bot.api.subscription_edits == [(USER, "sub-c", True), (USER, "sub-c", False)]
    assert (await say(bot, USER, "/resumesub sub-c")).params["text"] == (
        "Sorry, this bot is not available here."
    )
    assert (await say(bot, ADMIN, "/resumesub")).params["text"] == (
        "Usage: /resumesub <payment id>"
    )
    del bot.api.charges["sub-c"]
    refused = await say(bot, ADMIN, "/cancelsub sub-c")
    assert refused.params["text"].startswith("Telegram did not cancel the subscription: ")
    assert "charge_not_found" in refused.params["text"].lower()


async def test_plans_say_a_cancelled_subscription_ends_and_does_not_renew(
    bot: RunningBot,
) -> None:
    """After /cancelsub the person's /plans says their plan ends on its date and will not
    renew (in their language); /resumesub, and a renewal paid anyway, make it renew again."""
    now = int(time.time())
    payload = f"plan:club:tg:{USER}"
    await pay(bot, USER, payload, 100, charge_id="sub-p", subscription_expiration_date=now + DAY)
    ends = time.strftime("%Y-%m-%d %H:%M", time.gmtime(now + DAY))
    renews = f"Your plan: Club, until {ends} UTC."
    assert renews in (await say(bot, USER, "/plans")).params["text"]
    await say(bot, ADMIN, "/cancelsub sub-p")
    ending = f"Your plan: Club. It ends on {ends} UTC and will not renew."
    listing = (await say(bot, USER, "/plans")).params["text"]
    assert ending in listing and renews not in listing
    russian = (await say(bot, USER, "/plans", language_code="ru")).params["text"]
    assert f"Ваш тариф: Club. Он закончится {ends} UTC и не будет продлён." in russian
    await say(bot, ADMIN, "/resumesub sub-p")
    assert renews in (await say(bot, USER, "/plans")).params["text"]
    await say(bot, ADMIN, "/cancelsub sub-p")
    assert ending in (await say(bot, USER, "/plans")).params["text"]
    await pay(
        bot,
        USER,
        payload,
        100,
        charge_id="sub-q",
        is_recurring=True,
        subscription_expiration_date=now + 31 * DAY,
    )
    later = time.strftime("%Y-%m-%d %H:%M", time.gmtime(now + 31 * DAY))
    listing = (await say(bot, USER, "/plans")).params["text"]
    assert f"Your plan: Club, until {later} UTC." in listing and "will not renew" not in listing
    assert bot.api.subscription_edits == [
        (USER, "sub-p", True),
        (USER, "sub-p", False),
        (USER, "sub-p", True),
    ]


async def test_a_cancel_telegram_refuses_is_not_kept(bot: RunningBot) -> None:
    """/cancelsub of a charge Telegram does not know keeps nothing: /plans says it renews."""
    now = int(time.time())
    payload = f"plan:club:tg:{USER}"
    await pay(bot, USER, payload, 100, charge_id="sub-r", subscription_expiration_date=now + DAY)
    del bot.api.charges["sub-r"]
    refused = await say(bot, ADMIN, "/cancelsub sub-r")
    assert refused.params["text"].startswith("Telegram did not cancel the subscription: ")
    assert "will not renew" not in (await say(bot, USER, "/plans")).params["text"]


async def test_cancelsub_in_a_group_is_refused(bot: RunningBot) -> None:
    """An operator's /cancelsub in a group is told to use a private chat."""
    reply = await say(bot, -100, "/cancelsub sub-x", user_id=ADMIN, chat_type="supergroup")
    assert reply.params["text"] == "Use /quota in a private chat with me."  # as /refund says
    assert bot.api.subscription_edits == []
