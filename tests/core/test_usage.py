"""Usage accounting: prices parsed strictly, each stored reply charged to its person, chat
and client by UTC day in the same transaction as the reply, memory extraction charged on
its own, /usage and /metrics showing the totals.

The engine runs for real (SQLite file, the openai SDK against the fake model server); the
clock is injected so a UTC day change is a moved number, not a wait."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path

import pytest

from app.settings import load_settings
from core.domain.asking import UserMessage
from core.domain.attachments import Transcription
from core.domain.consultation import Usage
from core.domain.errors import ConfigError, ModelError
from core.domain.tools import ToolFailure, ToolUse
from core.domain.usage import (
    Accounting,
    CallKind,
    Charge,
    Payer,
    Price,
    PricesInvalid,
    ScopeKind,
    cost_of,
    day_of,
    month_start,
    parse_prices,
    transcription_usage,
)
from core.llm.llm import OpenAICompleter
from fakes.model_server import FakeModelServer
from storage.sqlite.store import SqliteStore
from telemetry.metrics import Metrics
from tests.api_harness import RunningApi
from tests.bot_harness import RunningBot, ask_private, sent, wait_sent
from tests.service_harness import Clock, make_service
from tests.time_zone import far_time_zone  # noqa: F401 - a fixture

PRICES = '{"test-model": {"input": 0.15, "output": 0.60}}'
MIDNIGHT = 1_764_201_600.0  # 2025-11-27 00:00:00 UTC
USER = 501


# -- prices ---------------------------------------------------------------------------------


def test_prices_are_per_million_tokens_and_a_dated_snapshot_has_its_models_price() -> None:
    """A cost is tokens times the price per million; the provider's dated model name
    (`…-2024-07-18`, `…-0125`) costs its model's price; a model without one costs 0 and
    says so."""
    prices = parse_prices('{"gpt-4o-mini": {"input": 0.15, "output": 0.6}, "gpt-4": '
                          '{"input": 30, "output": 60}}')  # fmt: skip
    usage = Usage(1_000_000, 500_000)
    assert cost_of(usage, "gpt-4o-mini", prices) == (pytest.approx(0.45), True)
    assert cost_of(usage, "gpt-4o-mini-2024-07-18", prices) == (pytest.approx(0.45), True)
    assert prices.of("gpt-4-0125") == Price(30.0, 60.0)
    assert prices.of("gpt-4o") is None  # a prefix is not a price
    assert prices.of("gpt-4o-2024-08-06") is None  # nor is a dated name's prefix
    assert cost_of(usage, "llama-3", prices) == (0.0, False)
    assert parse_prices("") == parse_prices("  ") == parse_prices("{}")


def test_only_a_whole_dated_name_takes_its_models_price() -> None:
    """The model's name, then a date and nothing else, takes the model's price; a name that
    goes on after the date (`gpt-4-0125-preview`) is another model, unpriced, and so is a
    name that merely starts like a priced one."""
    prices = parse_prices('{"gpt-4": {"input": 30, "output": 60}, "gpt-4o": '
                          '{"input": 2.5, "output": 10}}')  # fmt: skip
    assert prices.of("gpt-4o-2024-08-06") == Price(2.5, 10.0)
    assert prices.of("gpt-4-0613") == Price(30.0, 60.0)
    for other in (
        "gpt-4-0125-preview",
        "gpt-4-1106-vision-preview",
        "gpt-4o-2024-08-06-mini",
        "gpt-4o-mini-2024-07-18",
        "gpt-4-turbo",
        "gpt-4-2024-08",
        "my-gpt-4-0613",
    ):
        assert prices.of(other) is None, other


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[1, 2]",
        '{"m": 0.15}',
        '{"m": {"input": 0.15}}',
        '{"m": {"input": -1, "output": 0}}',
        '{"m": {"input": "0.1", "output": 0}}',
        '{"m": {"input": true, "output": 0}}',
        '{"m": {"input": NaN, "output": 0}}',
        '{"m": {"input": Infinity, "output": 0}}',
        '{"m": {"input": 1, "output": 1, "cached": 0.5}}',
        '{"": {"input": 1, "output": 1}}',
    ],
)
def test_bad_prices_are_refused_at_start_up(text: str) -> None:
    """MODEL_PRICES that is not an object of non-negative finite input/output prices stops
    the start with an error naming the setting, instead of making calls free."""
    with pytest.raises(PricesInvalid):
        parse_prices(text)
    with pytest.raises(ConfigError, match="MODEL_PRICES"):
        load_settings(model_prices=text, _env_file=None)


def test_a_transcription_model_may_be_priced_by_the_minute() -> None:
    """`per_minute` prices a transcription billed by the audio's length, alone or beside
    token prices; a half-given or negative price is refused like any other."""
    prices = parse_prices(
        '{"whisper-1": {"per_minute": 0.006}, '
        '"gpt-4o-transcribe": {"input": 2.5, "output": 10, "per_minute": 0.006}}'
    )
    assert prices.of("whisper-1") == Price(0.0, 0.0, 0.006)
    assert prices.of("gpt-4o-transcribe") == Price(2.5, 10.0, 0.006)
    for text in (
        '{"m": {"per_minute": -0.1}}',
        '{"m": {"input": 1, "per_minute": 0.1}}',
        '{"m": {"per_minute": "0.1"}}',
    ):
        with pytest.raises(PricesInvalid):
            parse_prices(text)


def test_a_transcription_costs_what_its_service_reports() -> None:
    """Tokens at token prices; seconds at the price per minute (unpriced without one);
    nothing reported: the transcript's tokens estimated as output, marked estimated."""
    prices = parse_prices(
        '{"whisper-1": {"per_minute": 0.006}, "gpt-4o-transcribe": {"input": 2.5, "output": 10}}'
    )
    tokens = Transcription("hi", "gpt-4o-transcribe", usage=Usage(1_000_000, 100_000))
    assert transcription_usage(tokens, prices) == (Usage(1_000_000, 100_000), 3.5, True)
    minute_and_half = Transcription("hi", "whisper-1", seconds=90)
    assert transcription_usage(minute_and_half, prices) == (Usage(), pytest.approx(0.009), True)
    unpriced = Transcription("hi", "gpt-4o-transcribe", seconds=90)
    assert transcription_usage(unpriced, prices) == (Usage(), 0.0, False)
    silent = Transcription("four words said here", "whisper-1")
    usage, cost, priced = transcription_usage(silent, prices)
    assert usage.estimated and usage.prompt_tokens == 0 and usage.completion_tokens > 0
    assert (cost, priced) == (0.0, True)


@pytest.mark.usefixtures("far_time_zone")
def test_the_day_is_the_utc_calendar_day() -> None:
    """Just before and at UTC midnight are two days, whatever the local time zone (run
    where local midnight is 14 hours earlier than UTC's)."""
    assert time.strftime("%Y-%m-%d", time.localtime(MIDNIGHT - 0.001)) == "2025-11-27"
    assert day_of(MIDNIGHT - 0.001) == "2025-11-26"
    assert day_of(MIDNIGHT) == "2025-11-27"
    assert month_start("2025-11-27") == "2025-11-01"


# -- the engine charges what it stores -----------------------------------------------------


async def person_totals(store: SqliteStore, person: str, since: str, until: str) -> list[tuple]:
    found = await store.usage_of(ScopeKind.PERSON, person, since_day=since, until_day=until)
    return [
        (t.model, t.prompt_tokens, t.completion_tokens, t.calls, t.estimated_calls) for t in found
    ]


async def test_each_stored_reply_is_charged_to_its_day_across_a_utc_midnight(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """A round before UTC midnight and the final answer after it count on two days, for
    the person and the chat, priced; /usage's report splits today from the month."""
    seen: list[Charge] = []
    service = make_service(
        store, completer, clock, accounting=Accounting(parse_prices(PRICES), seen.append)
    )
    clock.now = MIDNIGHT - 60
    payer = Payer(person="tg:501")
    model_server.enqueue("Which load?", usage={"prompt_tokens": 1000, "completion_tokens": 10})
    await service.turns.ask(UserMessage("tg:501", "Pick a database", payer=payer))
    clock.now = MIDNIGHT + 60
    model_server.enqueue("Use PostgreSQL.", usage={"prompt_tokens": 2000, "completion_tokens": 20})
    await service.turns.answer_now("tg:501", payer=payer)

    assert [(c.day, c.kind, c.usage) for c in seen] == [
        ("2025-11-26", CallKind.ROUND, Usage(1000, 10)),
        ("2025-11-27", CallKind.FINAL, Usage(2000, 20)),
    ]
    assert await person_totals(store, "tg:501", "2025-11-26", "2025-11-26") == [
        ("test-model", 1000, 10, 1, 0)
    ]
    chat = await store.usage_of(
        ScopeKind.CHAT, "tg:501", since_day="2025-11-27", until_day="2025-11-27"
    )
    assert [(t.prompt_tokens, t.cost) for t in chat] == [(2000, pytest.approx(0.000312))]
    report = await service.figures.usage(ScopeKind.PERSON, "tg:501")
    assert report.day == "2025-11-27"
    assert (report.today.prompt_tokens, report.month.prompt_tokens) == (2000, 3000)
    assert report.month.cost == pytest.approx((3000 * 0.15 + 30 * 0.6) / 1e6)
    assert not report.month.estimated and report.month.unpriced == ()


async def test_a_follow_up_is_charged_as_one(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """A follow-up's answer is charged with it, as its own kind of call."""
    seen: list[Charge] = []
    service = make_service(
        store, completer, clock, accounting=Accounting(observe=seen.append), followup_limit=2
    )
    payer = Payer(person="tg:3")
    model_server.enqueue("Which load?")
    await service.turns.ask(UserMessage("tg:3", "Pick a database", payer=payer))
    model_server.enqueue("Use PostgreSQL.")
    await service.turns.answer_now("tg:3", payer=payer)
    model_server.enqueue("Back it up nightly.")
    await service.turns.follow_up("tg:3", "And backups?", payer=payer)
    assert [(c.kind, c.person, c.chat) for c in seen] == [
        (CallKind.ROUND, "tg:3", "tg:3"),
        (CallKind.FINAL, "tg:3", "tg:3"),
        (CallKind.FOLLOW_UP, "tg:3", "tg:3"),
    ]
    day = day_of(clock.now)
    assert (await person_totals(store, "tg:3", day, day))[0][3] == 3


async def test_estimated_and_unpriced_usage_is_marked(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """A provider reporting no usage is charged the product's estimate, marked; a model
    without a price costs 0 and the report names it."""
    service = make_service(store, completer, clock)  # no prices at all
    model_server.enqueue("Which load do you expect?", no_usage=True)
    await service.turns.ask(
        UserMessage("tg:9", "Pick a database for me", payer=Payer(person="tg:9"))
    )
    report = await service.figures.usage(ScopeKind.PERSON, "tg:9")
    assert report.today.prompt_tokens > 0 and report.today.completion_tokens > 0
    assert report.today.estimated
    assert (report.today.cost, report.today.unpriced) == (0.0, ("test-model",))


async def test_a_reply_and_its_charge_survive_a_crash_together(
    db_path: Path, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """The charge commits with the reply: once a reply is stored (so it can be delivered),
    reopening the file after the process died finds its count too. There is no moment in
    between to lose: neither an uncounted delivered reply nor a count without a reply."""
    store = await SqliteStore.open(db_path)
    service = make_service(store, completer, clock)
    model_server.enqueue("Which load?", usage={"prompt_tokens": 7, "completion_tokens": 3})
    await service.turns.ask(UserMessage("tg:1", "Pick a database", payer=Payer(person="tg:1")))
    # A crash: no orderly close (the writer thread's connection is dropped as is).
    reopened = await SqliteStore.open(db_path)
    try:
        assert (await reopened.load_active("tg:1")) is not None
        day = day_of(clock.now)
        assert await person_totals(reopened, "tg:1", day, day) == [("test-model", 7, 3, 1, 0)]
    finally:
        await reopened.close()
        await store.close()


async def test_a_failed_model_call_charges_nothing(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """A call that failed stores no reply, so it is not charged (the SDK reports no usage
    for a failed call)."""
    service = make_service(store, completer, clock)
    model_server.enqueue(status=500)
    with pytest.raises(ModelError):
        await service.turns.ask(UserMessage("tg:2", "Pick a database", payer=Payer(person="tg:2")))
    day = day_of(clock.now)
    assert await person_totals(store, "tg:2", day, day) == []


# -- /usage and /metrics -------------------------------------------------------------------


pytestmark = pytest.mark.bot_settings(model_prices=PRICES)


async def usage_text(bot: RunningBot, *, user: int = USER, args: str = "") -> str:
    before = len(sent(bot, USER))
    await bot.send(USER, f"/usage{args}", user_id=user)
    return (await wait_sent(bot, USER, before + 1))[-1]


async def test_usage_shows_the_senders_tokens_and_cost_today_and_this_month(
    bot: RunningBot,
) -> None:
    """After a round, /usage shows the sender's tokens in and out and the cost, today and
    this month; arguments change nothing; /metrics counts tokens and cost by model and
    kind."""
    assert "0 tokens in, 0 out, $0.0000" in await usage_text(bot)
    bot.model.enqueue("Which load?", usage={"prompt_tokens": 1_000_000, "completion_tokens": 0})
    await ask_private(bot, USER, "Pick a database")
    text = await usage_text(bot, args=" all users; DROP TABLE usage_daily")
    assert "Today: 1000000 tokens in, 0 out, $0.1500" in text
    assert "This month: 1000000 tokens in, 0 out, $0.1500" in text
    assert "estimated" not in text and "no price" not in text
    body, _ = bot.runtime.metrics.render()
    metrics = body.decode()
    assert (
        'consult_usage_tokens_total{direction="input",kind="round",model="test-model"} 1e+06'
        in metrics
    )
    assert 'consult_usage_cost_total{kind="round",model="test-model"} 0.15' in metrics


async def test_usage_is_in_russian_for_a_russian_user(bot: RunningBot) -> None:
    """The report is localized."""
    before = len(sent(bot, USER))
    await bot.send(USER, "/usage", user_id=USER, language_code="ru")
    text = (await wait_sent(bot, USER, before + 1))[-1]
    assert "Сегодня" in text and "За месяц" in text


async def test_usage_lists_the_senders_tool_calls_by_tool(bot: RunningBot) -> None:
    """Tool calls are listed under the totals only when there were any: each tool as
    "server · tool" with its calls, the failed ones said, names no toolbox offered as
    "unknown tools" (last), today and this month; in Russian too. Another person's calls
    are not theirs."""
    assert "Tool calls" not in await usage_text(bot)
    today = day_of(time.time())
    uses = [
        ToolUse("time__get_current_time", "time", "get_current_time", "{}", "03:00"),
        ToolUse("docs__search", "docs", "search", "{}", error="late", failure=ToolFailure.TIMEOUT),
        ToolUse("made_up", "", "made_up", "{}", error="no", failure=ToolFailure.UNKNOWN_TOOL),
        ToolUse("time__get_current_time", "time", "get_current_time", "{}", "03:01"),
        ToolUse("docs__search", "docs", "search", "{}", "open at 9"),
    ]
    charged = Accounting().charge(
        Usage(1, 1),
        model="test-model",
        kind=CallKind.FINAL,
        chat=f"tg:{USER}",
        payer=Payer(person=f"tg:{USER}"),
        at=time.time(),
        tool_uses=uses,
    )
    other = dataclasses.replace(charged, person="tg:9", chat="tg:9")
    await bot.runtime.store.add_usage([charged, other])
    assert charged.day == today
    listed = "docs · search 2 (1 failed), time · get_current_time 2, unknown tools 1 (1 failed)"
    text = await usage_text(bot)
    assert f"\nTool calls today: {listed}\nTool calls this month: {listed}" in text
    before = len(sent(bot, USER))
    await bot.send(USER, "/usage", user_id=USER, language_code="ru")
    russian = (await wait_sent(bot, USER, before + 1))[-1]
    assert (
        "Вызовы инструментов сегодня: docs · search 2 (не удалось: 1), "
        "time · get_current_time 2, неизвестные инструменты 1 (не удалось: 1)"
    ) in russian


def test_unpriced_models_are_one_metrics_series() -> None:
    """Model names can come from requests: one without a price is labelled "unpriced", so
    the series stay as few as the priced models."""
    metrics = Metrics()
    for model in ("free-1", "free-2"):
        metrics.record_charge(
            Charge("2025-11-27", "c", model, CallKind.MEMORY, Usage(3, 4), 0.0, False)
        )
    text = metrics.render()[0].decode()
    assert 'consult_usage_tokens_total{direction="output",kind="memory",model="unpriced"} 8.0' in (
        text
    )
    assert "free-1" not in text


# -- the HTTP API ----------------------------------------------------------------------------


@pytest.mark.api_settings(model_prices=PRICES, api_token="secret-token")
async def test_api_rounds_are_charged_to_the_user_the_session_and_the_token(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """A session's rounds count for its `userId`, for the session and for the bearer
    token's client key (a hash, never the token); a session without a userId counts for
    the session and the key only."""
    headers = {"Content-Type": "application/json", "Authorization": "Bearer secret-token"}
    model_server.enqueue("Answer one.", usage={"prompt_tokens": 40, "completion_tokens": 2})
    model_server.enqueue("Answer two.", usage={"prompt_tokens": 60, "completion_tokens": 3})
    for body in ({"message": "Pick a database", "userId": "u-1"}, {"message": "And a cache"}):
        response = await api.client.post("/api/chat", data=json.dumps(body), headers=headers)
        assert response.status == 200, await response.text()
        session = (await response.json())["sessionId"]
    day = day_of(time.time())

    async def tokens(scope: ScopeKind, key: str) -> list[int]:
        totals = await api.store.usage_of(scope, key, since_day=day, until_day=day)
        return [t.prompt_tokens for t in totals]

    client = "token:" + hashlib.sha256(b"secret-token").hexdigest()[:32]
    assert await tokens(ScopeKind.PERSON, "api:u-1") == [40]
    assert await tokens(ScopeKind.CHAT, f"api:{session}") == [60]
    assert await tokens(ScopeKind.CLIENT, client) == [100]
