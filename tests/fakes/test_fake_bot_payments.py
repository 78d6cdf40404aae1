"""The fake Bot API takes payments in Stars from the real python-telegram-bot as Telegram
does: invoices and subscription links checked, pre-checkout queries answered once, charges
refunded once, and its payment updates parsed by PTB."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from telegram import Bot, LabeledPrice, Update
from telegram.error import BadRequest

from fakes.bot_api import TOKEN, FakeBotApi


@pytest.fixture
async def bare_bot(bot_api: FakeBotApi) -> AsyncIterator[Bot]:
    """A bare PTB Bot talking to the fake."""
    async with Bot(TOKEN, base_url=bot_api.base_url) as b:
        yield b


async def test_an_invoice_in_stars_is_sent_as_a_message(bot_api: FakeBotApi, bare_bot: Bot) -> None:
    """sendInvoice in XTR with one price and no provider token answers an invoice message."""
    sent = await bare_bot.send_invoice(
        7,
        "Pro",
        "More a day",
        "plan:pro:tg:7",
        "XTR",
        [LabeledPrice("Pro", 250)],
        provider_token="",
    )
    assert sent.invoice is not None
    assert (sent.invoice.currency, sent.invoice.total_amount, sent.invoice.title) == (
        "XTR",
        250,
        "Pro",
    )
    (call,) = bot_api.calls_of("sendInvoice")
    assert call.params["payload"] == "plan:pro:tg:7"


@pytest.mark.parametrize(
    ("currency", "prices", "token", "says"),
    [
        ("USD", [LabeledPrice("Pro", 250)], "", "CURRENCY"),
        ("XTR", [LabeledPrice("a", 1), LabeledPrice("b", 2)], "", "one price"),
        ("XTR", [LabeledPrice("Pro", 250)], "provider:123", "PROVIDER"),
    ],
)
async def test_an_invoice_telegram_would_refuse_is_refused(
    bare_bot: Bot, currency: str, prices: list[LabeledPrice], token: str, says: str
) -> None:
    """Another currency, several prices or a provider token are refused for Stars."""
    with pytest.raises(BadRequest, match=f"(?i){says}"):
        await bare_bot.send_invoice(7, "Pro", "d", "p", currency, prices, provider_token=token)


async def test_a_subscription_link_takes_only_thirty_days(
    bot_api: FakeBotApi, bare_bot: Bot
) -> None:
    """createInvoiceLink with subscription_period 2592000 answers a link; another period fails."""
    link = await bare_bot.create_invoice_link(
        "Pro", "d", "plan:pro:tg:7", "XTR", [LabeledPrice("Pro", 250)], subscription_period=2592000
    )
    assert link == bot_api.invoice_links[0]
    with pytest.raises(BadRequest, match=r"(?i)SUBSCRIPTION_PERIOD"):
        await bare_bot.create_invoice_link(
            "Pro", "d", "p", "XTR", [LabeledPrice("Pro", 250)], subscription_period=86400
        )


async def test_a_pre_checkout_query_is_answered_once(bot_api: FakeBotApi, bare_bot: Bot) -> None:
    """PTB parses the built query; its first answer is kept, a second one refused; a refusal
    needs a reason."""
    update = Update.de_json(bot_api.pre_checkout_query(7, "plan:pro:tg:7", 250), bare_bot)
    query = update.pre_checkout_query
    assert query is not None and query.invoice_payload == "plan:pro:tg:7"
    assert query.from_user.id == 7 and query.total_amount == 250 and query.currency == "XTR"
    with pytest.raises(BadRequest, match=r"(?i)ERROR_MESSAGE_EMPTY"):
        await bare_bot.answer_pre_checkout_query(query.id, ok=False, error_message=" ")
    assert await bare_bot.answer_pre_checkout_query(query.id, ok=False, error_message="No")
    with pytest.raises(BadRequest, match=r"(?i)QUERY_ID_INVALID"):
        await bare_bot.answer_pre_checkout_query(query.id, ok=True)
    assert bot_api.checkout_answers == {query.id: (False, "No")}


async def test_a_charge_is_refunded_once_and_a_subscription_cancelled(
    bot_api: FakeBotApi, bare_bot: Bot
) -> None:
    """A built payment's charge is refunded once to its payer; another's is not found."""
    built = bot_api.successful_payment(
        7,
        "plan:pro:tg:7",
        250,
        charge_id="ch-1",
        is_recurring=True,
        subscription_expiration_date=2_000_000_000,
    )
    paid = Update.de_json(built, bare_bot).effective_message
    assert paid is not None and paid.successful_payment is not None
    assert paid.successful_payment.telegram_payment_charge_id == "ch-1"
    assert paid.successful_payment.is_recurring
    with pytest.raises(BadRequest, match=r"(?i)CHARGE_NOT_FOUND"):
        await bare_bot.refund_star_payment(8, "ch-1")
    assert await bare_bot.refund_star_payment(7, "ch-1")
    with pytest.raises(BadRequest, match=r"(?i)ALREADY_REFUNDED"):
        await bare_bot.refund_star_payment(7, "ch-1")
    assert await bare_bot.edit_user_star_subscription(7, "ch-1", is_canceled=True)
    assert bot_api.refunds == [(7, "ch-1")]
    assert bot_api.subscription_edits == [(7, "ch-1", True)]
