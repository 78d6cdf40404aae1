"""Quotas in the engine: limits checked before the model is called, at their exact
boundary, by UTC day and month, with admins' overrides and exemptions; a consultation
under way finishes with its final answer instead of being cut.

The engine runs for real (SQLite file, the openai SDK against the fake model server); the
clock is injected, so a UTC day or month change is a moved number."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import aiosqlite
import pytest

from core.domain.asking import UserMessage
from core.domain.consultation import Role, Status
from core.domain.errors import FollowUpUnavailable, ModelError
from core.domain.outcomes import Notice
from core.domain.quotas import (
    Limit,
    PersonLimits,
    QuotaConfig,
    QuotaExceeded,
    QuotaOverride,
    Stage,
    Standing,
    decide,
    limits_for,
    next_day,
    next_month,
)
from core.domain.usage import Payer, ScopeKind, day_of
from core.llm.llm import OpenAICompleter
from fakes.model_server import FakeModelServer
from storage.sqlite.store import SqliteStore
from tests.service_harness import Clock, make_service
from tests.time_zone import far_time_zone  # noqa: F401 - a fixture

PERSON = "tg:501"
PAYER = Payer(person=PERSON)
# 2025-11-30 23:59:00 UTC: a minute before both a day and a month change.
LAST_MINUTE = datetime(2025, 11, 30, 23, 59, tzinfo=UTC).timestamp()


def usage(total: int) -> dict[str, int]:
    """A reply's usage of `total` tokens (prompt and completion both count)."""
    return {"prompt_tokens": total - 1, "completion_tokens": 1}


# -- the decision, pure --------------------------------------------------------------------


def test_the_boundary_is_limit_minus_one_allowed_and_limit_refused() -> None:
    """A person at limit−1 tokens may start; at the limit they may not, and the refusal
    names the limit, its size, what was used and the next UTC midnight."""
    limits = PersonLimits(daily_tokens=100)
    now = LAST_MINUTE
    assert decide(limits, 0, Standing(tokens_today=99), Stage.START, now).hit is None
    verdict = decide(limits, 0, Standing(tokens_today=100), Stage.START, now)
    assert verdict.refused and verdict.hit is not None
    assert (verdict.hit.limit, verdict.hit.allowed, verdict.hit.used) == (
        Limit.USER_DAILY_TOKENS,
        100,
        100,
    )
    assert verdict.hit.resets_at == datetime(2025, 12, 1, tzinfo=UTC).timestamp()


def test_a_consultation_under_way_finishes_and_follow_ups_and_starts_are_refused() -> None:
    """Over a token limit: a turn of a consultation under way is answered as final (not
    refused); a start or a follow-up is refused; the consultation count limits starts only."""
    over = Standing(tokens_today=10, consultations_today=3)
    limits = PersonLimits(daily_tokens=10, daily_consultations=3)
    now = LAST_MINUTE
    assert decide(limits, 0, over, Stage.CONTINUE, now).finish
    assert decide(limits, 0, over, Stage.START, now).refused
    assert decide(limits, 0, over, Stage.FOLLOW_UP, now).refused
    counted = PersonLimits(daily_consultations=3)
    assert decide(counted, 0, over, Stage.CONTINUE, now).hit is None
    assert decide(counted, 0, over, Stage.FOLLOW_UP, now).hit is None
    start = decide(counted, 0, over, Stage.START, now)
    assert start.hit is not None and start.hit.limit is Limit.USER_DAILY_CONSULTATIONS


def test_resets_are_the_next_utc_midnight_and_the_first_of_the_next_month() -> None:
    """Reset times are UTC: a monthly limit resets on the 1st, December's in January."""
    december = datetime(2025, 12, 31, 12, tzinfo=UTC).timestamp()
    assert next_day(december) == datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    assert next_month(december) == datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    assert next_month(LAST_MINUTE) == datetime(2025, 12, 1, tzinfo=UTC).timestamp()
    monthly = decide(PersonLimits(monthly_tokens=5), 0, Standing(tokens_month=5), Stage.START, 0)
    assert monthly.hit is not None and monthly.hit.resets_at == next_month(0)


def test_exemptions_beat_limits_and_an_override_replaces_only_the_daily_tokens() -> None:
    """An exempt person (settings or `off`) has no person limits; an override's number
    replaces the daily token limit and keeps the others."""
    config = QuotaConfig(10, 100, 2, exempt=frozenset({"tg:1"}))
    assert limits_for(config, "tg:1", None).exempt
    assert not limits_for(config, "tg:1", None).any
    assert limits_for(config, "tg:2", QuotaOverride("tg:2", None)) == PersonLimits(
        exempt=True, overridden=True
    )
    assert limits_for(config, "tg:2", QuotaOverride("tg:2", 50)) == PersonLimits(
        50, 100, 2, overridden=True
    )
    assert limits_for(config, "tg:2", None) == PersonLimits(10, 100, 2)


# -- the engine ----------------------------------------------------------------------------


async def test_a_person_at_the_daily_limit_is_refused_before_the_model_is_called(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """99 of 100 tokens used: the next consultation is answered; at 100 a new one is
    refused with nothing stored (no consultation, no message) and no model call."""
    service = make_service(store, completer, clock, quotas=QuotaConfig(user_daily_tokens=100))
    model_server.enqueue("Use PostgreSQL.", usage=usage(99))
    await service.turns.ask(UserMessage("tg:501", "Pick a database", payer=PAYER, is_group=False))
    await service.lifecycle.reset("tg:501")
    model_server.enqueue("Fine.", usage=usage(1))
    await service.turns.ask(
        UserMessage("tg:501", "And a cache?", payer=PAYER)
    )  # 99 used: allowed, now 100
    await service.lifecycle.reset("tg:501")
    calls = len(model_server.requests)
    with pytest.raises(QuotaExceeded) as refused:
        await service.turns.ask(UserMessage("tg:501", "One more", payer=PAYER))
    assert refused.value.hit.limit is Limit.USER_DAILY_TOKENS
    assert (refused.value.hit.used, refused.value.hit.allowed) == (100, 100)
    assert len(model_server.requests) == calls
    assert await store.load_active("tg:501") is None
    assert sorted(s.request for s in await store.recent("tg:501", 10)) == [
        "And a cache?",
        "Pick a database",
    ]


@pytest.mark.usefixtures("far_time_zone")
async def test_a_new_utc_day_and_month_lift_the_daily_and_monthly_limits(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """Used up at 23:59 UTC on 30 November: refused then; after UTC midnight the day and
    the month are new, so the same person is answered, whatever the server's time zone
    (run where it is already 1 December all along)."""
    config = QuotaConfig(user_daily_tokens=50, user_monthly_tokens=60)
    service = make_service(store, completer, clock, quotas=config)
    clock.now = LAST_MINUTE - 3600
    model_server.enqueue("Answer.", usage=usage(60))
    await service.turns.ask(UserMessage("tg:501", "First", payer=PAYER))
    await service.lifecycle.reset("tg:501")
    clock.now = LAST_MINUTE
    with pytest.raises(QuotaExceeded) as refused:
        await service.turns.ask(UserMessage("tg:501", "Second", payer=PAYER))
    assert refused.value.hit.limit is Limit.USER_DAILY_TOKENS
    clock.now = LAST_MINUTE + 120  # 1 December, 00:01 UTC
    model_server.enqueue("Answer again.", usage=usage(5))
    reply = await service.turns.ask(UserMessage("tg:501", "Third", payer=PAYER))
    assert reply.text == "Answer again."


async def test_the_monthly_limit_holds_across_days_until_the_first(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """A monthly limit reached on one day still refuses the next day of the same month,
    and says it resets on the first of the next month."""
    service = make_service(store, completer, clock, quotas=QuotaConfig(user_monthly_tokens=30))
    clock.now = LAST_MINUTE - 5 * 86400
    model_server.enqueue("Answer.", usage=usage(30))
    await service.turns.ask(UserMessage("tg:501", "First", payer=PAYER))
    await service.lifecycle.reset("tg:501")
    clock.now = LAST_MINUTE
    with pytest.raises(QuotaExceeded) as refused:
        await service.turns.ask(UserMessage("tg:501", "Second", payer=PAYER))
    assert refused.value.hit.limit is Limit.USER_MONTHLY_TOKENS
    assert refused.value.hit.resets_at == datetime(2025, 12, 1, tzinfo=UTC).timestamp()


async def test_a_consultation_under_way_gets_its_final_answer_then_nothing_more(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """A round takes the person past the limit: their next message is answered as the
    consultation's final answer (the model is told it is the last round; its cost counts),
    marked with the limit; then a follow-up and a new consultation are refused."""
    service = make_service(
        store, completer, clock, quotas=QuotaConfig(user_daily_tokens=100), followup_limit=3
    )
    model_server.enqueue("Which load?", usage=usage(150))
    first = await service.turns.ask(UserMessage("tg:501", "Pick a database", payer=PAYER))
    assert (first.round, first.max_rounds, first.is_final) == (1, 3, False)
    model_server.enqueue("Use PostgreSQL.", usage=usage(40))
    final = await service.turns.ask(UserMessage("tg:501", "Heavy writes", payer=PAYER))
    assert final.is_final and final.is_complete and final.round == 2
    assert Notice.QUOTA_FINAL in final.notices
    assert final.quota is not None and final.quota.limit is Limit.USER_DAILY_TOKENS
    assert "last round" in model_server.requests[-1]["messages"][0]["content"].lower()
    day = day_of(clock.now)
    totals = await store.usage_of(ScopeKind.PERSON, PERSON, since_day=day, until_day=day)
    assert sum(t.prompt_tokens + t.completion_tokens for t in totals) == 190
    calls = len(model_server.requests)
    with pytest.raises(QuotaExceeded):
        await service.turns.follow_up("tg:501", "And backups?", payer=PAYER)
    with pytest.raises(QuotaExceeded):
        await service.turns.ask(UserMessage("tg:501", "A new question", payer=PAYER))
    assert len(model_server.requests) == calls
    latest = await store.load_latest("tg:501")
    assert latest is not None and latest.status is Status.COMPLETE
    assert [m.role for m in latest.messages] == [Role.USER, Role.ASSISTANT] * 2


async def test_retry_over_the_limit_finishes_the_consultation(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """/retry of a consultation under way over the limit is its final answer too."""
    service = make_service(store, completer, clock, quotas=QuotaConfig(user_daily_tokens=10))
    model_server.enqueue("Which load?", usage=usage(20))
    await service.turns.ask(UserMessage("tg:501", "Pick a database", payer=PAYER))
    model_server.enqueue(status=500)
    with pytest.raises(ModelError):
        await service.turns.ask(UserMessage("tg:501", "Heavy writes", payer=PAYER))
    model_server.enqueue("Use PostgreSQL.")
    reply = await service.turns.retry("tg:501", payer=PAYER)
    assert reply.is_complete and reply.quota is not None


async def test_the_consultation_count_limits_starts_per_utc_day(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """Two consultations a day: the third start is refused (nothing stored) while the
    second one's rounds go on; the next UTC day allows starting again. Forgetting the
    chat does not give starts back."""
    quotas = QuotaConfig(user_daily_consultations=2)
    service = make_service(store, completer, clock, quotas=quotas, default_max_rounds=2)
    clock.now = LAST_MINUTE - 3600
    for text in ("First", "Second"):
        await service.lifecycle.reset("tg:501")
        model_server.enqueue("Which load?")
        await service.turns.ask(UserMessage("tg:501", text, payer=PAYER))
    model_server.enqueue("Answer.")
    assert (await service.turns.ask(UserMessage("tg:501", "Some detail", payer=PAYER))).is_complete
    await service.lifecycle.forget("tg:501")
    with pytest.raises(QuotaExceeded) as refused:
        await service.turns.ask(UserMessage("tg:501", "Third", payer=PAYER))
    assert refused.value.hit.limit is Limit.USER_DAILY_CONSULTATIONS
    assert await store.load_latest("tg:501") is None
    assert await store.consultations_started(PERSON, day_of(clock.now)) == 2
    clock.now = LAST_MINUTE + 120
    model_server.enqueue("Which load?")
    assert (await service.turns.ask(UserMessage("tg:501", "Third", payer=PAYER))).round == 1


async def test_overrides_and_exemptions(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """An exempt person is never refused; an override lifts or lowers one person's daily
    limit, `off` exempts them, and removing it brings back the deployment's limit. An
    override applies even where the deployment sets no limit."""
    config = QuotaConfig(user_daily_tokens=10, exempt=frozenset({"tg:1"}))
    service = make_service(store, completer, clock, quotas=config)
    for person in ("tg:1", "tg:2"):
        model_server.enqueue("Answer.", usage=usage(50))
        await service.turns.ask(UserMessage(person, "First", payer=Payer(person=person)))
        await service.lifecycle.reset(person)
    model_server.enqueue("Answer.", usage=usage(1))
    await service.turns.ask(UserMessage("tg:1", "Again", payer=Payer(person="tg:1")))  # exempt
    with pytest.raises(QuotaExceeded):
        await service.turns.ask(UserMessage("tg:2", "Again", payer=Payer(person="tg:2")))
    await service.quotas.set_override("tg:2", 51)
    model_server.enqueue("Answer.", usage=usage(1))
    await service.turns.ask(UserMessage("tg:2", "Again", payer=Payer(person="tg:2")))  # 50 of 51
    await service.lifecycle.reset("tg:2")
    with pytest.raises(QuotaExceeded) as refused:
        await service.turns.ask(
            UserMessage("tg:2", "Once more", payer=Payer(person="tg:2"))
        )  # 51 of 51
    assert refused.value.hit.allowed == 51
    await service.quotas.set_override("tg:2", None)
    model_server.enqueue("Answer.")
    await service.turns.ask(UserMessage("tg:2", "Once more", payer=Payer(person="tg:2")))
    await service.lifecycle.reset("tg:2")
    assert await service.quotas.clear_override("tg:2")
    assert not await service.quotas.clear_override("tg:2")
    with pytest.raises(QuotaExceeded):
        await service.turns.ask(UserMessage("tg:2", "Last", payer=Payer(person="tg:2")))

    unlimited = make_service(store, completer, clock)  # no deployment limits
    await unlimited.quotas.set_override("tg:3", 5)
    model_server.enqueue("Answer.", usage=usage(5))
    await unlimited.turns.ask(UserMessage("tg:3", "First", payer=Payer(person="tg:3")))
    await unlimited.lifecycle.reset("tg:3")
    with pytest.raises(QuotaExceeded):
        await unlimited.turns.ask(UserMessage("tg:3", "Second", payer=Payer(person="tg:3")))


async def test_the_console_and_turns_without_a_person_have_no_quota(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """A turn with no person (the console, an anonymous group admin) is never limited."""
    service = make_service(store, completer, clock, quotas=QuotaConfig(user_daily_tokens=1))
    for text in ("First", "Second"):
        model_server.enqueue("Answer.", usage=usage(10))
        await service.turns.ask(UserMessage("console:local", text))
        await service.lifecycle.reset("console:local")


async def test_an_api_session_finishes_and_a_new_one_is_refused(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """The API token's daily limit: a new session is refused before it is opened; a
    session under way gets its final answer; a person's exemption does not lift it."""
    quotas = QuotaConfig(api_daily_tokens=100, exempt=frozenset({"api:u"}))
    service = make_service(store, completer, clock, quotas=quotas)
    payer = Payer(person="api:u", client="token:a")
    model_server.enqueue("Which load?", usage=usage(100))
    first = await service.sessions.start_session("Pick a database", max_rounds=3, payer=payer)
    model_server.enqueue("Use PostgreSQL.")
    final = await service.sessions.continue_session(first.consultation_id, "Heavy", payer=payer)
    assert final.is_complete and final.quota is not None
    assert final.quota.limit is Limit.API_DAILY_TOKENS
    with pytest.raises(QuotaExceeded):
        await service.sessions.open_session("Another", payer=payer)
    other = Payer(person="api:u", client="token:b")
    model_server.enqueue("Answer.")
    await service.sessions.start_session("Another", payer=other)


async def test_a_follow_up_is_checked_after_the_consultation_is_found(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """A follow-up the consultation cannot take says so first, whatever the quota."""
    service = make_service(store, completer, clock, quotas=QuotaConfig(user_daily_tokens=1))
    with pytest.raises(FollowUpUnavailable):
        await service.turns.follow_up("tg:501", "And backups?", payer=PAYER)


async def test_a_hold_the_store_cannot_change_leaves_the_answer_delivered(
    store: SqliteStore,
    db_path: Path,
    completer: OpenAICompleter,
    model_server: FakeModelServer,
    clock: Clock,
) -> None:
    """Once a turn is admitted, settling and releasing its hold are best effort: with the
    holds' table gone while the model answers, the reply is still answered, stored and
    charged (the hold, had it been kept, would expire)."""
    service = make_service(store, completer, clock, quotas=QuotaConfig(user_daily_tokens=1000))
    answering = asyncio.Event()
    model_server.enqueue("Use PostgreSQL.", usage=usage(30), hold=answering)
    turn = asyncio.create_task(
        service.turns.ask(UserMessage("tg:501", "Pick a database", payer=PAYER))
    )
    await model_server.wait_requests(1)
    async with aiosqlite.connect(db_path) as db:
        await db.execute("ALTER TABLE quota_holds RENAME TO quota_holds_gone")
        await db.commit()
    answering.set()
    reply = await turn
    assert reply.text == "Use PostgreSQL."
    day = day_of(clock.now)
    totals = await store.usage_of(ScopeKind.PERSON, PERSON, since_day=day, until_day=day)
    assert sum(t.prompt_tokens + t.completion_tokens for t in totals) == 30


async def test_a_failed_turn_releases_its_hold(
    store: SqliteStore, completer: OpenAICompleter, model_server: FakeModelServer, clock: Clock
) -> None:
    """A turn whose call failed holds nothing afterwards: its reservation (far above the
    limit) would otherwise refuse the person's next consultation."""
    service = make_service(store, completer, clock, quotas=QuotaConfig(user_daily_tokens=100))
    model_server.enqueue(status=500)
    with pytest.raises(ModelError):
        await service.turns.ask(UserMessage("tg:501", "Pick a database", payer=PAYER))
    model_server.enqueue("Which load?", usage=usage(10))
    assert (
        await service.turns.ask(UserMessage("tg:502", "Pick a cache", payer=PAYER))
    ).text == "Which load?"
