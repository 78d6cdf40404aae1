"""The console's Payments page on a real server and store (SQLite and PostgreSQL), with
refunds through the fake Bot API: the list newest first, filtered by person and plan; a
refund through the form, CSRF-protected, confirmed, asked of Telegram first and audited,
revoking the plan; a refund Telegram refuses, a second refund and forged filters and charge
ids change nothing; a cancel kept until it is resumed; a stored bot's person read by their
bot's limits and plans."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator

import pytest

from app.bot_secrets import TokenBox, tail_of
from core.domain.bots import BotLimits, BotProfile, NewBot
from core.domain.payments import Grant, Payment
from core.domain.plans import parse_plans
from fakes.bot_api import TOKEN as BOT_TOKEN
from fakes.bot_api import FakeBotApi
from tests.admin_harness import Console, console_settings, running_console
from tests.store_contract import StoreKind

PLANS = [
    {"id": "pro", "title": "Pro", "stars": 250},
    {"id": "max", "title": "Max", "stars": 900, "limits": {"daily_consultations": 9}},
]
DAY = 86_400.0


@pytest.fixture
async def console(kind: StoreKind, database: str, bot_api: FakeBotApi) -> AsyncIterator[Console]:
    settings = console_settings(
        kind,
        database,
        plans=json.dumps(PLANS),
        telegram_bot_token=BOT_TOKEN,
        telegram_api_base_url=bot_api.base_url,
    )
    async with running_console(settings) as c:
        yield c


async def paid(
    console: Console, bot_api: FakeBotApi, charge: str, user: int, plan: str, at: float
) -> None:
    """A payment of `user` for `plan` kept and granted, and known to Telegram."""
    stars = 250 if plan == "pro" else 900
    until = at + 30 * DAY if plan == "max" else None  # "max" is paid as a subscription here
    payload = f"plan:{plan}:tg:{user}"
    payment = Payment(
        charge, f"tg:{user}", plan, stars, "XTR", payload, at, subscription_expires_at=until
    )
    await console.store.payments.record_payment(payment, Grant(plan, 30 * DAY))
    bot_api.charges[charge] = user


async def test_the_list_is_newest_first_and_filtered(console: Console, bot_api: FakeBotApi) -> None:
    """Payments are listed newest first, by person and by plan (and summed on the
    dashboard); bad filters are 400."""
    now = time.time()
    await paid(console, bot_api, "ch-a", 1, "pro", now - 20)
    await paid(console, bot_api, "ch-b", 2, "max", now - 10)
    await paid(console, bot_api, "ch-c", 1, "max", now)
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/payments")
    assert status == 200
    assert html.index("ch-c") < html.index("ch-b") < html.index("ch-a")
    assert "2,050 ⭐ kept" in html
    status, html = await console.page("/admin/payments?person=tg:1")
    assert status == 200 and "ch-a" in html and "ch-c" in html and "ch-b" not in html
    status, html = await console.page("/admin/payments?plan=max")
    assert status == 200 and "ch-b" in html and "ch-c" in html and "ch-a" not in html
    status, html = await console.page("/admin/")
    assert status == 200 and "Telegram Stars, the last 30 days" in html
    assert "plans active now" in html and "2,050" in html
    for query in ("person=<b>x</b>", "plan=PRO!", "person=" + "9" * 200):
        status, html = await console.page(f"/admin/payments?{query}")
        assert status == 400 and "<b>x</b>" not in html


async def test_a_refund_is_asked_of_telegram_audited_and_revokes_the_plan(
    console: Console, bot_api: FakeBotApi
) -> None:
    """The confirmed form refunds through Telegram, marks the payment, revokes the plan and
    writes the audit entry; without CSRF or confirmation nothing happens; a second is 400."""
    await paid(console, bot_api, "ch-1", 42, "pro", time.time())
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/people/tg%3A42")
    assert status == 200 and "<dt>Plan</dt><dd>pro, until " in html
    path = "/admin/payments/ch-1/refund"
    csrf = await console.csrf("/admin/payments")
    no_csrf = await console.client.post(path, data={"confirm": "yes"}, allow_redirects=False)
    assert no_csrf.status == 403
    unconfirmed = await console.client.post(path, data={"csrf": csrf}, allow_redirects=False)
    assert unconfirmed.status == 400
    assert bot_api.refunds == []
    done = await console.client.post(
        path, data={"csrf": csrf, "confirm": "yes"}, allow_redirects=False
    )
    assert done.status == 303
    assert bot_api.refunds == [(42, "ch-1")]
    payment = await console.store.payments.payment("ch-1")
    assert payment is not None and payment.refunded_at is not None
    assert await console.store.payments.active_plan("tg:42", time.time()) is None
    entries = await console.store.audit_log(before_id=None, limit=10)
    assert [(e.action, e.target) for e in entries if e.action == "refund"] == [("refund", "ch-1")]
    status, html = await console.page("/admin/payments")
    assert status == 200 and "refunded " in html
    status, html = await console.page("/admin/people/tg%3A42")
    assert status == 200 and "<dt>Plan</dt>" not in html
    again = await console.client.post(
        path, data={"csrf": csrf, "confirm": "yes"}, allow_redirects=False
    )
    assert again.status == 400 and bot_api.refunds == [(42, "ch-1")]
    assert bot_api.subscription_edits == []  # a one-time plan: nothing to cancel
    metrics = await (await console.client.get("/metrics")).text()
    assert 'consult_refunds_total{bot="0"} 1.0' in metrics


async def test_refunding_a_subscription_cancels_it(console: Console, bot_api: FakeBotApi) -> None:
    """A subscription's payment refunded from the console is cancelled too."""
    await paid(console, bot_api, "ch-sub", 42, "max", time.time())
    assert await console.sign_in() == 303
    csrf = await console.csrf("/admin/payments")
    answer = await console.client.post(
        "/admin/payments/ch-sub/refund",
        data={"csrf": csrf, "confirm": "yes"},
        allow_redirects=False,
    )
    assert answer.status == 303
    assert bot_api.refunds == [(42, "ch-sub")]
    assert bot_api.subscription_edits == [(42, "ch-sub", True)]


async def test_a_refund_telegram_refuses_changes_nothing(
    console: Console, bot_api: FakeBotApi
) -> None:
    """Telegram not knowing the charge: 400 with its words, the plan and payment kept."""
    await paid(console, bot_api, "ch-2", 42, "pro", time.time())
    del bot_api.charges["ch-2"]
    assert await console.sign_in() == 303
    csrf = await console.csrf("/admin/payments")
    answer = await console.client.post(
        "/admin/payments/ch-2/refund", data={"csrf": csrf, "confirm": "yes"}
    )
    assert answer.status == 400 and "CHARGE_NOT_FOUND" in await answer.text()
    payment = await console.store.payments.payment("ch-2")
    assert payment is not None and payment.refunded_at is None
    assert await console.store.payments.active_plan("tg:42", time.time()) is not None
    entries = await console.store.audit_log(before_id=None, limit=10)
    assert all(e.action != "refund" for e in entries)


async def test_forged_charge_ids_are_not_found(console: Console) -> None:
    """A charge id the console does not take, or no such payment: 404, Telegram not asked."""
    assert await console.sign_in() == 303
    csrf = await console.csrf("/admin/payments")
    for charge in ("no-such-charge", "a%20b", "x" * 300):
        answer = await console.client.post(
            f"/admin/payments/{charge}/refund", data={"csrf": csrf, "confirm": "yes"}
        )
        assert answer.status == 404


async def test_a_subscription_is_cancelled_without_a_refund(
    console: Console, bot_api: FakeBotApi
) -> None:
    """Cancel renewal: Telegram is asked editUserStarSubscription (is_canceled), the audit
    log says so, and the plan and payment stay as they were (it runs to its end); without
    CSRF or the box, or for a one-time plan's payment, nothing is asked."""
    await paid(console, bot_api, "ch-sub", 42, "max", time.time())
    await paid(console, bot_api, "ch-once", 43, "pro", time.time())
    assert await console.sign_in() == 303
    status, html = await console.page("/admin/payments")
    assert status == 200 and html.count("Cancel renewal</button>") == 1
    csrf = await console.csrf("/admin/payments")
    path = "/admin/payments/ch-sub/cancel"
    no_csrf = await console.client.post(path, data={"confirm": "yes"}, allow_redirects=False)
    assert no_csrf.status == 403
    unconfirmed = await console.client.post(path, data={"csrf": csrf}, allow_redirects=False)
    assert unconfirmed.status == 400
    once = await console.client.post(
        "/admin/payments/ch-once/cancel", data={"csrf": csrf, "confirm": "yes"}
    )
    assert once.status == 400 and "no subscription" in await once.text()
    assert bot_api.subscription_edits == []
    done = await console.client.post(
        path, data={"csrf": csrf, "confirm": "yes"}, allow_redirects=False
    )
    assert done.status == 303
    assert bot_api.subscription_edits == [(42, "ch-sub", True)]
    assert bot_api.refunds == []
    payment = await console.store.payments.payment("ch-sub")
    assert payment is not None and payment.refunded_at is None
    assert await console.store.payments.active_plan("tg:42", time.time()) is not None
    entries = await console.store.audit_log(before_id=None, limit=10)
    cancels = [(e.action, e.target) for e in entries if e.action == "cancel_subscription"]
    assert cancels == [("cancel_subscription", "ch-sub")]


async def test_a_cancelled_renewal_is_shown_and_resumed(
    console: Console, bot_api: FakeBotApi
) -> None:
    """After Cancel renewal the Payments page says "renewal cancelled" and offers Resume
    renewal instead, as does the person's page; Resume renewal asks Telegram (is_canceled
    false), is audited and offers Cancel renewal again; a resume Telegram refuses keeps the
    cancel."""
    await paid(console, bot_api, "ch-sub", 42, "max", time.time())
    assert await console.sign_in() == 303
    csrf = await console.csrf("/admin/payments")
    form = {"csrf": csrf, "confirm": "yes"}
    cancel = await console.client.post(
        "/admin/payments/ch-sub/cancel", data=form, allow_redirects=False
    )
    assert cancel.status == 303
    status, html = await console.page("/admin/payments")
    assert status == 200 and "renewal cancelled " in html
    assert "Cancel renewal</button>" not in html and html.count("Resume renewal</button>") == 1
    status, html = await console.page("/admin/people/tg%3A42")
    assert status == 200 and "renewal cancelled</strong>" in html
    assert "it ends then and is not renewed" in html
    del bot_api.charges["ch-sub"]
    refused = await console.client.post("/admin/payments/ch-sub/resume", data=form)
    assert refused.status == 400 and "CHARGE_NOT_FOUND" in await refused.text()
    held = await console.store.payments.active_plan("tg:42", time.time())
    assert held is not None and held.renewal_cancelled_at is not None
    bot_api.charges["ch-sub"] = 42
    unconfirmed = await console.client.post(
        "/admin/payments/ch-sub/resume", data={"csrf": csrf}, allow_redirects=False
    )
    assert unconfirmed.status == 400
    resume = await console.client.post(
        "/admin/payments/ch-sub/resume", data=form, allow_redirects=False
    )
    assert resume.status == 303
    assert bot_api.subscription_edits == [(42, "ch-sub", True), (42, "ch-sub", False)]
    status, html = await console.page("/admin/payments")
    assert status == 200 and "renewal cancelled" not in html
    assert html.count("Cancel renewal</button>") == 1
    status, html = await console.page("/admin/people/tg%3A42")
    assert status == 200 and "renewal cancelled" not in html
    entries = await console.store.audit_log(before_id=None, limit=10)
    assert [e.action for e in entries if "subscription" in e.action] == [
        "resume_subscription",
        "cancel_subscription",
    ]


async def test_a_cancel_telegram_refuses_writes_nothing(
    console: Console, bot_api: FakeBotApi
) -> None:
    """Telegram not knowing the charge: 400 with its words, no audit entry."""
    await paid(console, bot_api, "ch-sub2", 42, "max", time.time())
    del bot_api.charges["ch-sub2"]
    assert await console.sign_in() == 303
    csrf = await console.csrf("/admin/payments")
    answer = await console.client.post(
        "/admin/payments/ch-sub2/cancel", data={"csrf": csrf, "confirm": "yes"}
    )
    assert answer.status == 400 and "CHARGE_NOT_FOUND" in await answer.text()
    entries = await console.store.audit_log(before_id=None, limit=10)
    assert all(e.action != "cancel_subscription" for e in entries)
    status, html = await console.page("/admin/payments")
    assert status == 200 and "renewal cancelled" not in html and "Cancel renewal</button>" in html


SECRET = "payments-console-secret-key-0123456789"
SECOND = "222:SECOND-BOT-TOKEN"


async def test_a_stored_bots_payment_is_refunded_with_that_bots_token(
    kind: StoreKind, database: str
) -> None:
    """A payment made in stored bot n (its person `tg<n>:42`) is refunded and cancelled
    with bot n's token, opened under SECRET_KEY; the deployment's bot's token would be
    refused (Telegram knows a charge only in the bot it was paid to)."""
    api = FakeBotApi(tokens={BOT_TOKEN: (123456, "consult_bot"), SECOND: (222, "second_bot")})
    await api.start()
    try:
        settings = console_settings(
            kind,
            database,
            plans=json.dumps(PLANS),
            telegram_bot_token=BOT_TOKEN,
            telegram_api_base_url=api.base_url,
            secret_key=SECRET,
        )
        async with running_console(settings) as console:
            sealed = TokenBox(SECRET).seal(SECOND)
            new = NewBot(222, "second_bot", sealed, tail_of(SECOND), "", BotProfile())
            bot = await console.store.bots.add_bot(new, at=time.time())
            person = f"tg{bot.id}:42"
            payment = Payment(
                "ch-two",
                person,
                "max",
                900,
                "XTR",
                f"plan:max:{person}",
                time.time(),
                subscription_expires_at=time.time() + 30 * DAY,
            )
            await console.store.payments.record_payment(payment, Grant("max", 30 * DAY))
            api.charges["ch-two"] = 42
            api.charge_bots["ch-two"] = SECOND
            assert await console.sign_in() == 303
            page = f"/admin/people/tg{bot.id}%3A42"
            status, html = await console.page(page)  # their plan's limits, bot n's plans
            assert status == 200 and "9 consultations a day" in html
            csrf = await console.csrf("/admin/payments")
            form = {"csrf": csrf, "confirm": "yes"}
            cancelled = await console.client.post(
                "/admin/payments/ch-two/cancel", data=form, allow_redirects=False
            )
            assert cancelled.status == 303
            refunded = await console.client.post(
                "/admin/payments/ch-two/refund", data=form, allow_redirects=False
            )
            assert refunded.status == 303
            assert api.payment_tokens == [
                ("editUserStarSubscription", "ch-two", SECOND),
                ("refundStarPayment", "ch-two", SECOND),
                ("editUserStarSubscription", "ch-two", SECOND),
            ]
            assert await console.store.payments.active_plan(person, time.time()) is None
            status, html = await console.page(page)  # revoked: the plan's limits gone
            assert status == 200 and "9 consultations a day" not in html
            api.charges["ch-main"] = 42
            api.charge_bots["ch-main"] = SECOND  # paid to bot 2, claimed by the deployment's
            main = Payment("ch-main", "tg:42", "pro", 250, "XTR", "plan:pro:tg:42", time.time())
            await console.store.payments.record_payment(main, Grant("pro", 30 * DAY))
            refused = await console.client.post("/admin/payments/ch-main/refund", data=form)
            assert refused.status == 400 and "CHARGE_NOT_FOUND" in await refused.text()
            assert SECOND not in await refused.text() and BOT_TOKEN not in await refused.text()
            for held, says in (
                (f"tg{bot.id}:43", "gold (no longer among their bot's plans), until "),
                ("tg:44", "gold (no longer in PLANS), until "),
            ):
                gold = Payment(f"ch-{held}", held, "gold", 75, "XTR", "p", time.time())
                await console.store.payments.record_payment(gold, Grant("gold", 7 * DAY))
                status, html = await console.page(f"/admin/people/{held.replace(':', '%3A')}")
                assert status == 200 and says in html, html
    finally:
        await api.stop()


async def test_a_stored_bots_person_is_read_by_their_bots_limits_and_plans(
    console: Console,
) -> None:
    """Bot n's person's page shows bot n's limits and, for a plan bot n sells, the plan as
    its own (its limits applied); the deployment's person keeps the deployment's; the plan
    filter lists every bot's plans, an id two bots sell labelled by both."""
    gold = {"id": "gold", "title": "Gold", "stars": 75, "limits": {"daily_consultations": 9}}
    pro = {"id": "pro", "title": "Shop Pro", "stars": 50}
    profile = BotProfile(
        limits=BotLimits(daily_tokens=777), plans=parse_plans(json.dumps([gold, pro]), None)
    )
    new = NewBot(222, "shop_bot", "sealed", "tail", "", profile)
    bot = await console.store.bots.add_bot(new, at=time.time())
    holder, other = f"tg{bot.id}:43", f"tg{bot.id}:44"
    bought = Payment(f"ch-{holder}", holder, "gold", 75, "XTR", "p", time.time())
    await console.store.payments.record_payment(bought, Grant("gold", 7 * DAY))
    assert await console.sign_in() == 303
    status, html = await console.page(f"/admin/people/tg{bot.id}%3A43")
    assert status == 200 and "<dt>Plan</dt><dd>gold, until " in html
    assert "9 consultations a day" in html and "777 tokens a day" in html
    status, html = await console.page(f"/admin/people/tg{bot.id}%3A44")
    assert status == 200 and "777 tokens a day" in html and "<dt>Plan</dt>" not in html
    status, html = await console.page("/admin/people/tg%3A45")
    assert status == 200 and "777 tokens a day" not in html  # (a CSRF token may hold 777)
    changed = dataclasses.replace(profile, limits=BotLimits(daily_tokens=888))
    await console.store.bots.update_bot(bot.id, at=time.time(), profile=changed)
    status, html = await console.page(f"/admin/people/tg{bot.id}%3A44")
    assert status == 200 and "888 tokens a day" in html  # the bot's profile read again
    status, html = await console.page("/admin/payments")
    assert status == 200
    assert '<option value="gold">gold</option>' in html
    assert '<option value="max">max</option>' in html
    assert '<option value="pro">pro (this deployment&#39;s bot, @shop_bot)</option>' in html
    assert other not in html  # no payment of theirs


async def test_the_dashboard_shows_a_stored_bots_sales_without_plans(
    kind: StoreKind, database: str
) -> None:
    """No PLANS: no Stars section while nothing is sold; a stored bot selling its own plans
    brings it, with its payments."""
    async with running_console(console_settings(kind, database)) as console:
        assert await console.sign_in() == 303
        status, html = await console.page("/admin/")
        assert status == 200 and "Telegram Stars" not in html
        plans = parse_plans(json.dumps([{"id": "gold", "title": "Gold", "stars": 75}]), None)
        new = NewBot(222, "shop_bot", "sealed", "tail", "", BotProfile(plans=plans))
        bot = await console.store.bots.add_bot(new, at=time.time())
        payment = Payment("g-1", f"tg{bot.id}:5", "gold", 75, "XTR", "p", time.time())
        await console.store.payments.record_payment(payment, Grant("gold", DAY))
        status, html = await console.page("/admin/")
        assert status == 200 and "Telegram Stars, the last 30 days" in html
        assert "plans active now" in html
