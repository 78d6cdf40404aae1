"""The operator's figures: /stats in Telegram (an admin, in a private chat only), the same
as JSON at `GET /api/stats` (token required, `days` read strictly) and /stats in the
console.

The bot runs for real (the fake Bot API, the openai SDK against the fake model server, a
SQLite file) with the engine's clock injected: the history below crosses a UTC midnight
by moving a number, and the figures are checked against it as the admin reads them."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.commands.stats import rounds_used, stats_text
from core.domain.stats import Stats, daily_figures, period_of, rounds_distribution
from core.domain.tool_usage import UNKNOWN, ToolCount
from core.domain.usage import UsageTotal
from fakes.bot_api import Call, FakeBotApi
from fakes.model_server import FakeModelServer
from terminal.stats import stats_lines
from tests.api.test_api_ops import check
from tests.api_harness import RunningApi
from tests.bot_harness import (
    GROUP,
    RunningBot,
    bot_settings,
    post_in_group,
    running_bot,
    sent,
    wait_sent,
)
from tests.service_harness import Clock
from tests.terminal.test_console import console

MIDNIGHT = 1_764_201_600.0  # 2025-11-27 00:00:00 UTC
HOUR = 3600.0
ADMIN, OTHER, THIRD = 701, 702, 703
PRICES = '{"model-a": {"input": 1000, "output": 2000}}'  # per million: 0.001 a token in
TOKEN = "secret-token"
ROUND, FINAL = "Round ", "Final answer"  # the footers of a finished reply


@pytest.fixture
async def bot(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer, clock: Clock
) -> AsyncIterator[RunningBot]:
    settings = bot_settings(
        tmp_path / "bot.sqlite3",
        bot_api,
        model_server,
        llm_model="model-a",
        llm_models="model-a,model-b",
        model_prices=PRICES,
        admin_user_ids=str(ADMIN),
        default_max_rounds=3,
    )
    clock.now = MIDNIGHT - 2 * HOUR
    async with running_bot(settings, bot_api, model_server, clock=clock) as running:
        yield running


def said(chat: int, *fragments: str) -> Any:
    """A sendMessage or editMessageText to `chat` the fake accepted, containing each of
    `fragments`."""

    def match(call: Call) -> bool:
        return (
            call.method in ("sendMessage", "editMessageText")
            and call.result is not None
            and str(call.params.get("chat_id")) == str(chat)
            and all(fragment in call.params["text"] for fragment in fragments)
        )

    return match


async def turn(
    bot: RunningBot, chat: int, text: str, reply: str, tokens: int, footer: str, **kw: Any
) -> Call:
    """Send `text` in a private chat; the model replies `reply` using `tokens` in and a
    hundredth of that out; wait until the reply is shown finished (with its `footer`: the
    turn is stored by then, before the clock moves on)."""
    bot.model.enqueue(reply, usage={"prompt_tokens": tokens, "completion_tokens": tokens // 100})
    await bot.send(chat, text, user_id=chat, **kw)
    return await bot.api.wait_for(said(chat, reply, footer), 10)


async def seed(bot: RunningBot, clock: Clock) -> None:
    """A history over two UTC days (D: the day of MIDNIGHT), all through Telegram.

    D-1 22:00 the admin asks; 22:01 /answer: the final answer in round 2 of 3 (early, 60 s).
    D-1 23:00 OTHER asks (their chat uses model-b, which has no price); 23:10 /reset.
    D 01:00 THIRD asks, never answers; the cleanup expires it at 02:01:40.
    D 03:00 the admin asks again, answers twice: the final answer in round 3 of 3 at
    03:02 (120 s); 03:03 a follow-up, replying to it.
    """
    await turn(bot, ADMIN, "Pick a database", "Which load?", 1000, ROUND)
    clock.now += 60
    await turn(bot, ADMIN, "/answer", "Use PostgreSQL.", 2000, FINAL)
    clock.now = MIDNIGHT - HOUR
    await bot.runtime.engine.settings.set_model(f"tg:{OTHER}", "model-b")
    await turn(bot, OTHER, "Plan a trip", "Where to?", 500, ROUND)
    clock.now += 600
    before = len(sent(bot, OTHER))
    await bot.send(OTHER, "/reset", user_id=OTHER)
    await wait_sent(bot, OTHER, before + 1)
    clock.now = MIDNIGHT + HOUR
    await turn(bot, THIRD, "Fix my bike", "Which part?", 300, ROUND)
    clock.now = MIDNIGHT + 2 * HOUR + 100
    assert await bot.runtime.engine.lifecycle.cleanup(retention_seconds=30 * 86400) == (1, 0)
    clock.now = MIDNIGHT + 3 * HOUR
    await turn(bot, ADMIN, "Choose a laptop", "Budget?", 100, ROUND)
    clock.now += 60
    await turn(bot, ADMIN, "About 1000", "Use?", 100, ROUND)
    clock.now += 60
    final = await turn(bot, ADMIN, "Mostly coding", "Take the light one.", 100, FINAL)
    clock.now += 60
    await turn(
        bot,
        ADMIN,
        "And the battery?",
        "Ten hours.",
        50,
        "Follow-up 1",
        reply_to_message=final.result,
    )
    clock.now = MIDNIGHT + 5 * HOUR


async def stats_reply(bot: RunningBot, user: int, **kwargs: Any) -> str:
    before = len(sent(bot, user))
    await bot.send(user, "/stats", user_id=user, **kwargs)
    return "\n".join((await wait_sent(bot, user, before + 1))[before:])


async def test_an_admin_sees_today_and_the_last_seven_days_as_they_happened(
    bot: RunningBot, clock: Clock
) -> None:
    """Each start and end counts on its own UTC day: today the expired consultation and
    the one completed in round 3 of 3 with its follow-up; the week adds yesterday's early
    finish and reset. The rounds the completed ones used, each count with its share.
    Tokens and cost by model, the unpriced one marked, and the times to
    a final answer (median and 95th percentile, interpolated)."""
    await seed(bot, clock)
    text = await stats_reply(bot, ADMIN, language_code="en")
    today, week = text.split("\n\n")
    assert today.splitlines() == [
        "Today (2025-11-27, UTC)",
        "People: 2",
        "Consultations: 2 started · 1 completed · 0 reset · 1 expired",
        "Completed: 50% of 2 ended",
        "Mean rounds: 3.0 · early finishes: 0 · follow-ups: 1",
        "Rounds used: 3 — 1 (100%)",
        "Time to final answer: median 2 min 0 s · 95th percentile 2 min 0 s",
        "Tokens and cost by model:",
        "• model-a: 650 in, 6 out, $0.6620",
        "Total: 650 in, 6 out, $0.6620",
    ]
    assert week.splitlines() == [
        "Last 7 days (2025-11-21 – 2025-11-27, UTC)",
        "People: 3",
        "Consultations: 4 started · 2 completed · 1 reset · 1 expired",
        "Completed: 50% of 4 ended",
        "Mean rounds: 2.5 · early finishes: 1 · follow-ups: 1",
        "Rounds used: 2 — 1 (50%) · 3 — 1 (50%)",
        "Time to final answer: median 1 min 30 s · 95th percentile 1 min 57 s",
        "Tokens and cost by model:",
        "• model-a: 3650 in, 36 out, $3.72",
        "• model-b: 500 in, 5 out, $0.0000 (no price)",
        "Total: 4150 in, 41 out, $3.72",
    ]


async def test_stats_with_nothing_stored_divides_by_nothing(bot: RunningBot) -> None:
    """An empty store: zeros, dashes for rates and times, no model calls; in Russian for a
    Russian admin."""
    text = await stats_reply(bot, ADMIN, language_code="ru")
    assert "Сегодня (2025-11-26, UTC)" in text
    assert "Завершены ответом: — из 0 окончившихся" in text
    assert "медиана — · 95-й процентиль —" in text
    assert "Обращений к модели не было." in text
    assert "Использовано раундов" not in text  # nothing completed: no distribution


async def test_stats_are_refused_to_anyone_not_an_admin(bot: RunningBot, clock: Clock) -> None:
    """Another user is refused in their language and sees no figures, whatever follows
    the command."""
    await seed(bot, clock)
    assert await stats_reply(bot, OTHER) == "/stats is for the bot's operators only."
    assert await stats_reply(bot, OTHER, language_code="ru") == (
        "/stats доступна только операторам бота."
    )
    before = len(sent(bot, OTHER))
    await bot.send(OTHER, f"/stats {ADMIN} 90", user_id=OTHER)
    assert (await wait_sent(bot, OTHER, before + 1))[-1] == (
        "/stats is for the bot's operators only."
    )


async def test_stats_in_a_group_are_refused_even_to_an_admin(bot: RunningBot, clock: Clock) -> None:
    """In a group nobody gets figures, the admin included, and the refusal is the same for
    everyone: it does not tell who the operators are."""
    await seed(bot, clock)
    for user in (ADMIN, OTHER):
        await post_in_group(bot, "/stats@consult_bot", user=user, addressed=None)
    call = await bot.api.wait_for(said(GROUP, "/stats"), 10, count=2)
    texts = [
        c.params["text"]
        for c in bot.api.calls_of("sendMessage")
        if c.params.get("chat_id") == GROUP and c.status == 200
    ]
    assert texts == ["/stats works only in a private chat with the bot."] * 2
    assert call.params["text"] == texts[-1]


# -- the HTTP API ----------------------------------------------------------------------------


def period(body: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = body[name]
    return found


@pytest.mark.api_settings(model_prices='{"test-model": {"input": 1, "output": 2}}', api_token=TOKEN)
async def test_api_stats_give_the_figures_as_json_with_the_token_only(
    api: RunningApi, model_server: FakeModelServer
) -> None:
    """Without the token 401 and no figures; with it, today and the last 7 days with every
    field, tokens and cost by model as a list; `?days=30` adds `lastDays`."""
    response = await api.client.get("/api/stats")
    assert response.status == 401
    assert "today" not in await response.text()
    wrong = await api.client.get("/api/stats", headers={"Authorization": "Bearer nope"})
    assert wrong.status == 401
    headers = {"Authorization": f"Bearer {TOKEN}"}
    model_server.enqueue("Which load?", usage={"prompt_tokens": 40, "completion_tokens": 2})
    body = json.dumps({"message": "Pick a database", "userId": "u-1"})
    chat = await api.client.post(
        "/api/chat", data=body, headers={**headers, "Content-Type": "application/json"}
    )
    assert chat.status == 200, await chat.text()

    response = await api.client.get("/api/stats", headers=headers)
    assert response.status == 200, await response.text()
    found = await response.json()
    assert set(found) == {"today", "last7Days"}
    week = period(found, "last7Days")
    assert week["days"] == 7 and week["until"] == period(found, "today")["until"]
    # The harness's sessions have one round: the first reply is the final answer.
    assert {k: week[k] for k in ("people", "started", "completed", "reset", "expired")} == {
        "people": 1,
        "started": 1,
        "completed": 1,
        "reset": 0,
        "expired": 0,
    }
    assert (week["completionRate"], week["meanRounds"]) == (1.0, 1.0)
    assert week["answerSecondsMedian"] == week["answerSecondsP95"] >= 0
    assert (week["earlyFinishes"], week["followUps"]) == (0, 0)
    assert week["models"] == [
        {
            "model": "test-model",
            "inputTokens": 40,
            "outputTokens": 2,
            "calls": 1,
            "estimatedCalls": 0,
            "cost": pytest.approx(44e-6),
            "priced": True,
        }
    ]
    assert (week["inputTokens"], week["outputTokens"]) == (40, 2)

    longer = await api.client.get("/api/stats?days=30", headers=headers)
    assert longer.status == 200
    last = period(await longer.json(), "lastDays")
    assert last["days"] == 30 and last["started"] == 1


@pytest.mark.api_settings(api_token=TOKEN)
async def test_api_stats_count_the_rounds_used_as_the_openapi_document_says(
    api: RunningApi,
) -> None:
    """Consultations completed in 1, 2, 2 and 10 rounds: `roundsUsed` lists every bucket
    from 1 to 9 and then 10 or more (`orMore`), with 0 where none fell, in each period; the
    response validates against the schema the OpenAPI document gives."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for rounds in (1, 2, 2, 10):
        session: dict[str, Any] = {"maxRounds": rounds}
        for _ in range(rounds):
            chat = await api.client.post(
                "/api/chat", json={"message": "Go on", **session}, headers=headers
            )
            reply = await chat.json()
            assert chat.status == 200, reply
            session = {"sessionId": reply["sessionId"]}
        assert reply["isComplete"] and reply["round"] == rounds

    response = await api.client.get("/api/stats?days=30", headers=headers)
    assert response.status == 200, await response.text()
    found = await response.json()
    document = await (await api.client.get("/api/openapi.json", headers=headers)).json()
    check(document, "/api/stats", "get", 200, found)
    expected = [{"rounds": n, "orMore": False, "count": 0} for n in range(1, 10)]
    expected += [{"rounds": 10, "orMore": True, "count": 1}]
    expected[0]["count"], expected[1]["count"] = 1, 2
    for name in ("today", "last7Days", "lastDays"):
        assert period(found, name)["roundsUsed"] == expected
        assert period(found, name)["meanRounds"] == 3.75


@pytest.mark.api_settings(api_token=TOKEN)
@pytest.mark.parametrize(
    "query",
    ["days=0", "days=91", "days=-1", "days=7.0", "days=abc", "days=", "days=%EF%BC%97",
     "days=007", "days=1&days=2", "days=" + "9" * 5000],
)  # fmt: skip
async def test_api_stats_refuse_a_bad_days(api: RunningApi, query: str) -> None:
    """`days` out of 1–90, not plain digits (a fullwidth 7, a decimal, a sign), given twice
    or oversized is 400 VALIDATION_ERROR."""
    response = await api.client.get(
        f"/api/stats?{query}", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert response.status in (400, 414), await response.text()
    if response.status == 400:
        assert (await response.json())["code"] == "VALIDATION_ERROR"


# -- the console ----------------------------------------------------------------------------


async def test_console_stats_print_the_figures_and_refuse_a_bad_count(
    tmp_path: Path, model_server: FakeModelServer
) -> None:
    """/stats prints today's and the last 7 days' figures, with the rounds the completed
    consultations used (two answered at once, one in round 2 of 3 on /answer); /stats 30
    the last 30; a count out of range or not a number reads nothing."""
    for reply in ("Plant in May.", "Water at dawn.", "Which soil?", "Add compost."):
        model_server.enqueue(reply, usage={"prompt_tokens": 100, "completion_tokens": 4})
    code, out = await console(
        tmp_path,
        model_server,
        [
            "/rounds 1",
            "When do I plant tomatoes?",
            "When do I water them?",
            "/rounds 3",
            "How do I improve my soil?",
            "/answer",
            "/stats",
            "/stats 30",
            "/stats 91",
            "/stats x",
        ],
    )
    assert code == 0
    assert re.search(r"\[today, (\d{4}-\d\d-\d\d) to \1 UTC\]", out)
    assert re.search(r"\[last 7 days, \d{4}-\d\d-\d\d to \d{4}-\d\d-\d\d UTC\]", out)
    assert "[last 30 days, " in out
    assert "people 0; consultations: 3 started, 3 completed, 0 reset, 0 expired" in out
    assert "completed 100% of 3 ended; mean rounds 1.3; early finishes 1; follow-ups 0" in out
    # today and 7 days, then today and 30 days
    assert out.count("  rounds used: 1 — 2 (67%), 2 — 1 (33%)\n") == 4
    assert "gpt-4o-mini: 400 tokens in, 16 out, $0.0000 (no price)" in out
    assert out.count("[usage: /stats [N], N days from 1 to 90]") == 2


def test_stats_of_nothing_have_no_rates() -> None:
    """No ends: no completion rate; no completions: no mean rounds."""
    stats = Stats("2025-11-27", "2025-11-27", reset=2)
    assert (stats.ended, stats.completion_rate, stats.mean_rounds) == (2, 0.0, None)


def test_rounds_used_list_only_the_buckets_something_fell_in() -> None:
    """Telegram and the console show the rounds buckets that counted something, the tail
    labelled `10+`, each with its share of the completed; nothing completed, no line."""
    stats = Stats(
        "2025-11-27",
        "2025-11-27",
        completed=4,
        rounds=rounds_distribution([(1, 1), (3, 2), (14, 1)]),
    )
    assert rounds_used(stats) == "1 — 1 (25%) · 3 — 2 (50%) · 10+ — 1 (25%)"
    assert "  rounds used: 1 — 1 (25%), 3 — 2 (50%), 10+ — 1 (25%)" in stats_lines("t", stats)
    nothing = Stats("2025-11-27", "2025-11-27", rounds=rounds_distribution([]))
    assert "Rounds used" not in stats_text("en", nothing, "Today")
    assert not [line for line in stats_lines("t", nothing) if "rounds used" in line]


def test_days_are_assembled_with_zeros_and_nothing_outside_the_period() -> None:
    """Every day of the period is listed, oldest first; a day with nothing counted has
    zeros; a count the store placed outside the period is dropped, never misfiled."""
    period = period_of(1_764_201_600.0 + 3600, 3)  # 2025-11-27 01:00 UTC: 25th to 27th
    days = daily_figures(
        period,
        [
            (0, "started", 2),
            (2, "complete", 1),
            (2, "expired", 1),
            (3, "started", 9),
            (-1, "reset", 4),
        ],
        [("2025-11-26", 100, 20, 0.5)],
    )
    assert [day.day for day in days] == ["2025-11-25", "2025-11-26", "2025-11-27"]
    assert [(d.started, d.completed, d.expired, d.reset) for d in days] == [
        (2, 0, 0, 0),
        (0, 0, 0, 0),
        (0, 1, 1, 0),
    ]
    assert (days[1].tokens, days[1].cost, days[2].ended) == (120, 0.5, 2)


def test_the_operators_stats_list_the_tool_calls_by_tool() -> None:
    """Telegram's and the terminal's /stats name every chat's tool calls in the period,
    failures and names no toolbox offered included; a period without any says nothing of
    tools."""
    tools = (ToolCount("time__get_current_time", 3, 1), ToolCount(UNKNOWN, 1))
    used = (UsageTotal("gpt-4o-mini", 400, 16, calls=2),)
    stats = Stats("2025-11-27", "2025-11-27", usage=used, tools=tools)
    assert stats_text("en", stats, "Today").endswith(
        "\nTool calls: time · get_current_time 3 (1 failed), unknown tools 1"
    )
    assert "Вызовы инструментов: time · get_current_time 3" in stats_text("ru", stats, "Сегодня")
    assert stats_lines("t", stats)[-1] == (
        "  tool calls: time · get_current_time 3 (1 failed), unknown tools 1"
    )
    quiet = Stats("2025-11-27", "2025-11-27", usage=used)
    assert "Tool calls" not in stats_text("en", quiet, "Today")
    assert not [line for line in stats_lines("t", quiet) if "tool calls" in line]
