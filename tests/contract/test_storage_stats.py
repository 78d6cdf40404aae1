"""The store's figures for the operator (`ConsultationStore.stats`), run on SQLite and
PostgreSQL (`tests.store_contract.STORE_KINDS`): a known history written through the
store's own writes, across a UTC midnight, counted for today and for the last 7 days;
an empty store counts zeros without dividing by them; the ends of consultations written
before `ended_at` existed are filled where their time is known."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import aiosqlite
import asyncpg
import pytest

from core.domain.consultation import Message, Role, Status, Usage
from core.domain.stats import (
    MAX_DAYS,
    ROUNDS_TAIL,
    Period,
    Stats,
    percentile_rank,
    period_of,
    rounds_distribution,
)
from core.domain.usage import CallKind, Charge
from storage.postgres import daily as postgres_daily
from storage.postgres import stats as postgres_stats
from storage.sqlite import daily as sqlite_daily
from storage.sqlite import schema as sqlite_schema
from storage.sqlite import stats as sqlite_stats
from storage.sqlite.store import SqliteStore
from storage.statements.tool_usage import CHATS_TOOL_CALLS
from storage.statements.usage import CHATS_BY_MODEL
from tests.store_contract import STORE_KINDS, StoreKind, make

if TYPE_CHECKING:
    from app.stores import Store

MIDNIGHT = 1_764_201_600.0  # 2025-11-27 00:00:00 UTC
HOUR = 3600.0
TODAY = period_of(MIDNIGHT + 12 * HOUR, 1)
WEEK = period_of(MIDNIGHT + 12 * HOUR, 7)


def charge(at: float, chat: str, model: str, kind: CallKind, tokens: int, person: str | None):
    """A charge of `tokens` in and a tenth of that out, priced at a cent per 1000 in."""
    day = period_of(at, 1).until_day
    usage = Usage(tokens, tokens // 10)
    return Charge(day, chat, model, kind, usage, tokens / 100_000, True, person)


async def reply(
    store: Store, c_id: str, at: float, *, round_from: int, status: Status, charged: Charge
) -> None:
    await store.record_reply(
        c_id,
        Message(Role.ASSISTANT, f"reply at {at}", at),
        expected_round=round_from,
        current_round=round_from + 1,
        status=status,
        last_activity_at=at,
        charge=charged,
    )


async def seed(store: Store) -> None:
    """The history the figures below are counted from (D: the day of MIDNIGHT).

    A: D-1 10:00 by user 1, final answer asked for in round 2 of 3 at 10:05 (early, 300 s).
    B: D-1 23:50 by user 2, final answer in round 3 of 3 at D 00:10 (1200 s); a follow-up
       answered at D 00:20.
    C: D-1 12:00 by user 3, reset at 12:30.
    E: D 01:00 by user 4, expired at 03:00 by the cleanup.
    F: D 02:00 by user 1, final answer in round 1 of 1 at 02:01 (60 s).
    G: D 04:00 through the API (no Telegram user), still active; its round charged to
       person api:u-9 with model-b.
    Z: D-7 (outside the week) by user 5, completed; charged that day.
    """
    day_before = MIDNIGHT - 24 * HOUR
    a = make("tg:1", at=day_before + 10 * HOUR, started_by=1)
    b = make("tg:2", at=MIDNIGHT - 10 * 60, started_by=2)
    c = make("tg:3", at=day_before + 12 * HOUR, started_by=3)
    e = make("tg:4", at=MIDNIGHT + 1 * HOUR, started_by=4)
    f = make("tg:1", at=MIDNIGHT + 2 * HOUR, started_by=1)
    g = make("api:s-1", at=MIDNIGHT + 4 * HOUR)
    z = make("tg:5", at=MIDNIGHT - 7 * 24 * HOUR, started_by=5)
    f.max_rounds = 1
    for consultation in (a, b, c, z):
        await store.create(consultation)

    def kind_of(status: Status) -> CallKind:
        return CallKind.FINAL if status is Status.COMPLETE else CallKind.ROUND

    for at, status in ((a.created_at + 60, Status.ACTIVE), (a.created_at + 300, Status.COMPLETE)):
        round_from = 0 if status is Status.ACTIVE else 1
        charged = charge(at, "tg:1", "model-a", kind_of(status), 1000, "tg:1")
        await reply(store, a.id, at, round_from=round_from, status=status, charged=charged)
    await reply(
        store,
        z.id,
        z.created_at + 30,
        round_from=0,
        status=Status.COMPLETE,
        charged=charge(z.created_at + 30, "tg:5", "model-a", CallKind.FINAL, 5000, "tg:5"),
    )
    await store.set_status(c.id, Status.RESET, at=c.created_at + 30 * 60)
    for round_from, at in enumerate((MIDNIGHT - 5 * 60, MIDNIGHT + 1, MIDNIGHT + 10 * 60)):
        status = Status.COMPLETE if round_from == 2 else Status.ACTIVE
        charged = charge(at, "tg:2", "model-a", kind_of(status), 2000, "tg:2")
        await reply(store, b.id, at, round_from=round_from, status=status, charged=charged)
    await store.record_follow_up(
        b.id,
        Message(Role.ASSISTANT, "follow-up answer", MIDNIGHT + 20 * 60),
        expected_follow_ups=0,
        last_activity_at=MIDNIGHT + 20 * 60,
        charge=charge(MIDNIGHT + 20 * 60, "tg:2", "model-b", CallKind.FOLLOW_UP, 300, "tg:2"),
    )
    await store.create(e)
    assert await store.expire_idle(inactive_since=e.created_at + 1, at=MIDNIGHT + 3 * HOUR) == 1
    await store.create(f)
    await reply(
        store,
        f.id,
        f.created_at + 60,
        round_from=0,
        status=Status.COMPLETE,
        charged=charge(f.created_at + 60, "tg:1", "model-b", CallKind.FINAL, 400, "tg:1"),
    )
    await store.create(g)
    await reply(
        store,
        g.id,
        g.created_at + 5,
        round_from=0,
        status=Status.ACTIVE,
        charged=charge(g.created_at + 5, "api:s-1", "model-b", CallKind.ROUND, 100, "api:u-9"),
    )


def usage_rows(stats: Stats) -> list[tuple[str, int, int, int]]:
    return [(u.model, u.prompt_tokens, u.completion_tokens, u.calls) for u in stats.usage]


def counted_rounds(stats: Stats) -> dict[str, int]:
    """The distribution's buckets that counted something, by label."""
    return {b.label: b.count for b in stats.rounds if b.count}


async def test_today_counts_each_start_and_end_on_its_own_utc_day(store: Store) -> None:
    """Today: the consultations created today, those that ended today whenever they
    started (B began yesterday), the follow-up, usage by model, people charged or
    starting, and the answer times' median and 95th percentile, interpolated."""
    await seed(store)
    today = await store.stats(TODAY)
    assert (today.since_day, today.until_day) == ("2025-11-27", "2025-11-27")
    assert (today.started, today.completed, today.reset, today.expired) == (3, 2, 0, 1)
    assert today.completion_rate == pytest.approx(2 / 3)
    assert (today.rounds_used, today.mean_rounds, today.early_finishes) == (4, 2.0, 0)
    assert counted_rounds(today) == {"1": 1, "3": 1}  # F answered at once, B in its third
    assert today.follow_ups == 1
    # tg:2 and tg:1 charged today, tg:4 started today, api:u-9 charged through the API.
    assert today.people == 4
    assert usage_rows(today) == [("model-a", 4000, 400, 2), ("model-b", 800, 80, 3)]
    assert (today.prompt_tokens, today.completion_tokens) == (4800, 480)
    assert today.cost == pytest.approx(0.048)
    assert today.answer_seconds_median == pytest.approx(630)
    assert today.answer_seconds_p95 == pytest.approx(60 + 0.95 * 1140)


async def test_the_last_seven_days_include_today_and_leave_the_eighth_day_out(
    store: Store,
) -> None:
    """The week: six starts (not the one 7 days before today), three final answers, one
    reset, one expiry, one early finish; usage and people of the week only."""
    await seed(store)
    week = await store.stats(WEEK)
    assert (week.since_day, week.until_day) == ("2025-11-21", "2025-11-27")
    assert (week.started, week.completed, week.reset, week.expired) == (6, 3, 1, 1)
    assert week.completion_rate == pytest.approx(3 / 5)
    assert (week.rounds_used, week.early_finishes, week.follow_ups) == (6, 1, 1)
    assert counted_rounds(week) == {"1": 1, "2": 1, "3": 1}  # F, A (early), B; not Z
    assert sum(b.rounds * b.count for b in week.rounds) == week.rounds_used
    assert week.people == 5  # users 1-4 and api:u-9; not user 5
    assert usage_rows(week) == [("model-a", 8000, 800, 5), ("model-b", 800, 80, 3)]
    assert week.answer_seconds_median == pytest.approx(300)
    assert week.answer_seconds_p95 == pytest.approx(300 + 0.9 * 900)


async def test_day_by_day_each_event_counts_on_its_own_day_and_every_day_is_listed(
    store: Store,
) -> None:
    """The week day by day: every one of its seven days listed, oldest first; starts,
    ends and usage on the day they happened (B started yesterday, ended today); days
    with nothing are zeros, and the day before the week is left out."""
    await seed(store)
    days = await store.daily_stats(WEEK)
    assert [d.day for d in days] == [f"2025-11-{n}" for n in range(21, 28)]
    yesterday, today = days[-2], days[-1]
    assert (yesterday.started, yesterday.completed, yesterday.reset, yesterday.expired) == (
        3, 1, 1, 0,
    )  # fmt: skip
    assert (today.started, today.completed, today.reset, today.expired) == (3, 2, 0, 1)
    assert (yesterday.prompt_tokens, yesterday.completion_tokens) == (4000, 400)
    assert yesterday.cost == pytest.approx(0.04)
    assert (today.prompt_tokens, today.completion_tokens, today.tokens) == (4800, 480, 5280)
    assert today.cost == pytest.approx(0.048)
    assert all(d.started == d.tokens == 0 and d.cost == 0 for d in days[:-2])
    week = await store.stats(WEEK)
    assert sum(d.started for d in days) == week.started
    assert sum(d.completed + d.reset + d.expired for d in days) == week.ended


async def test_day_by_day_of_an_empty_store_is_every_day_at_zero(store: Store) -> None:
    days = await store.daily_stats(TODAY)
    assert [(d.day, d.started, d.ended, d.tokens) for d in days] == [("2025-11-27", 0, 0, 0)]


async def test_an_empty_store_counts_zeros_and_divides_by_nothing(store: Store) -> None:
    """Nothing stored: every count 0, rates, means and times None."""
    stats = await store.stats(WEEK)
    assert (stats.people, stats.started, stats.ended, stats.follow_ups) == (0, 0, 0, 0)
    assert stats.completion_rate is None and stats.mean_rounds is None
    assert stats.answer_seconds_median is None and stats.answer_seconds_p95 is None
    assert stats.usage == () and stats.cost == 0
    assert [b.label for b in stats.rounds] == [*map(str, range(1, ROUNDS_TAIL)), "10+"]
    assert all(b.count == 0 for b in stats.rounds)


async def test_rounds_past_the_tail_share_its_bucket(kind: StoreKind, tmp_path: Path) -> None:
    """Consultations completed after 10, 12 and 40 rounds all count in "10+", and one
    stored as completed with no round at all shows in a bucket of its own: the store's
    read returns at most ROUNDS_TAIL + 1 rows whatever is stored."""
    address = await kind.new_database(tmp_path)
    store = await kind.open(address)
    try:
        for n, rounds in enumerate((10, 12, 40, 0, 2)):
            consultation = make(f"tg:{n}", at=MIDNIGHT + HOUR)
            await store.create(consultation)
            await kind.execute(
                address,
                "UPDATE consultations SET status = 'complete', current_round = $1,"
                " max_rounds = 50, ended_at = $2 WHERE id = $3",
                rounds,
                MIDNIGHT + 2 * HOUR,
                consultation.id,
            )
        stats = await store.stats(TODAY)
    finally:
        await store.close()
        await kind.drop_database(address)
    assert counted_rounds(stats) == {"0": 1, "2": 1, "10+": 3}
    assert stats.rounds[0].label == "0" and stats.rounds[-1].label == "10+"


def test_the_rounds_distribution_lists_every_bucket_up_to_the_tail() -> None:
    """Buckets 1..9 and 10+, zeros included; rows past the tail add to it; 0 rounds is
    listed only when counted."""
    buckets = rounds_distribution([(3, 2), (10, 1), (11, 4)])
    assert [(b.label, b.count) for b in buckets][2:] == [
        ("3", 2), *[(str(n), 0) for n in range(4, 10)], ("10+", 5),
    ]  # fmt: skip
    assert [b.label for b in rounds_distribution([(0, 1)])][:2] == ["0", "1"]
    assert len(rounds_distribution([])) == ROUNDS_TAIL


async def test_a_chat_that_moves_onto_an_active_one_ends_its_own_on_its_last_activity(
    store: Store,
) -> None:
    """The old key's active consultation is reset by a move: it counts as reset on the day
    of its last activity."""
    await store.create(make("tg:old", at=MIDNIGHT + HOUR))
    await store.create(make("tg:new", at=MIDNIGHT + 2 * HOUR))
    await store.move_chat("tg:old", "tg:new")
    assert (await store.stats(TODAY)).reset == 1


def test_periods_are_whole_utc_days_ending_today() -> None:
    """A period of N days starts at 00:00 UTC N-1 days before today and ends at tomorrow's
    00:00 UTC; days outside 1..MAX_DAYS are refused."""
    assert period_of(MIDNIGHT, 1) == Period(1, MIDNIGHT, MIDNIGHT + 24 * HOUR, *["2025-11-27"] * 2)
    last = period_of(MIDNIGHT + 24 * HOUR - 0.001, 7)
    assert (last.since, last.since_day) == (MIDNIGHT - 6 * 24 * HOUR, "2025-11-21")
    for days in (0, -1, MAX_DAYS + 1):
        with pytest.raises(ValueError, match="days"):
            period_of(MIDNIGHT, days)


def test_percentile_ranks_interpolate_as_percentile_cont() -> None:
    """One value: itself; two: the weighted point between; the rank never passes the end."""
    assert percentile_rank(1, 0.95) == (0, 0.0)
    assert percentile_rank(2, 0.5) == (0, 0.5)
    rank, weight = percentile_rank(3, 0.95)
    assert (rank, weight) == (1, pytest.approx(0.9))
    assert percentile_rank(101, 0.95) == (95, pytest.approx(0.0))


async def test_ends_stored_before_the_migration_are_filled_where_known(tmp_path: Path) -> None:
    """A reset, and a completed consultation without follow-ups, ended at their last
    activity; a completed one with follow-ups and an expired one stay uncounted as ends
    (their end time is not known), though their starts count."""
    path = tmp_path / "old.sqlite3"
    before = [m for m in sqlite_schema.MIGRATIONS if m.__name__ < "m017"]
    async with aiosqlite.connect(path, isolation_level=None) as db:
        await sqlite_schema.migrate(db, before)
        rows = [
            ("a", "reset", 0, MIDNIGHT + 10),
            ("b", "complete", 0, MIDNIGHT + 20),
            ("c", "complete", 2, MIDNIGHT + 30),
            ("d", "expired", 0, MIDNIGHT + 40),
        ]
        for c_id, status, follow_ups, at in rows:
            await db.execute(
                "INSERT INTO consultations (id, chat_key, status, max_rounds, current_round,"
                " initial_request, created_at, last_activity_at, follow_ups)"
                " VALUES (?, ?, ?, 3, 1, 'q', ?, ?, ?)",
                (c_id, f"tg:{c_id}", status, MIDNIGHT, at, follow_ups),
            )
    store = await SqliteStore.open(path)
    try:
        stats = await store.stats(TODAY)
    finally:
        await store.close()
    assert (stats.started, stats.completed, stats.reset, stats.expired) == (4, 1, 1, 0)
    assert stats.answer_seconds_median == pytest.approx(20)


async def test_every_sqlite_figure_is_read_through_an_index_on_the_period(tmp_path: Path) -> None:
    """No query of the figures scans a whole table: each searches an index on the period."""
    store = await SqliteStore.open(tmp_path / "plan.sqlite3")
    await store.close()
    queries = [v for k, v in vars(sqlite_stats).items() if k.isupper() and k.startswith("_")]
    assert len(queries) == 8
    queries += [sqlite_daily._EVENTS, sqlite_daily._USAGE]
    async with aiosqlite.connect(tmp_path / "plan.sqlite3") as db:
        for query in queries:
            arguments = (1,) * (len(set(re.findall(r"\?\d+", query))) or query.count("?"))
            plan = [row[3] for row in await db.execute_fetchall(
                f"EXPLAIN QUERY PLAN {query}", arguments
            )]  # fmt: skip
            scans = [step for step in plan if step.startswith("SCAN") and "subquery" not in step]
            assert scans == [], (query, plan)
            assert any("USING" in step and "INDEX" in step for step in plan), (query, plan)


async def test_every_postgres_figure_can_be_read_through_an_index(tmp_path: Path) -> None:
    """With sequential scans priced out, every query of the figures uses an index: the
    indexes on the period serve them (a planner may still scan a tiny table)."""
    postgres = STORE_KINDS[1]
    address = await postgres.new_database(tmp_path)
    try:
        store = await postgres.open(address)
        await store.close()
        connection = await asyncpg.connect(address)
        try:
            await connection.execute("SET enable_seqscan = off")
            days, times = ("2025-11-27", "2025-11-27"), (1.0, 2.0)
            queries = {
                postgres_stats._STARTED: times,
                postgres_stats._ENDED: (*times, 0.5, 0.95),
                postgres_stats._ROUNDS: (*times, 10),
                postgres_stats._PEOPLE: (*days, *times),
                postgres_stats._TOTALS: days,
                CHATS_BY_MODEL: (*days, 50),
                CHATS_TOOL_CALLS: days,
                postgres_daily._EVENTS: times,
                postgres_daily._USAGE: days,
            }
            for query, arguments in queries.items():
                plan = "\n".join(
                    row[0] for row in await connection.fetch(f"EXPLAIN {query}", *arguments)
                )
                assert "Seq Scan" not in plan, (query, plan)
        finally:
            await connection.close()
    finally:
        await postgres.drop_database(address)
