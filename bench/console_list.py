"""`python -m bench.console_list`: the console's consultation and people lists with many
consultations and a long usage history.

Seeds a fresh store (SQLite file, or with `--postgres` a schema of its own in
TEST_DATABASE_URL, dropped afterwards) with `--count` consultations through the store's
own migrations, and the model usage of `--people` people over `--usage-days` days (each
active on some of the days, 2-3 rows a day: models and kinds of call, for the person and
their chat; quota overrides and today's starts for some), then starts the product's HTTP
server (`python -m api`, ADMIN_TOKEN set) as a child process, signs in through the form
and times whole page loads on 127.0.0.1: the consultation list's first page, a page deep
in it (after following "Older"), each filter and a transcript; the people list's first
page, a page deep in it, a search matching a few and one matching none, and one person's
page. Prints p50 / p95 / max per page over `--repeat` loads and writes
bench/results/console-list-*.json. Every process started is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from bench.pg_runs import test_database_url, with_settings
from bench.procs import ROOT, Processes
from bench.runs import free_port
from storage.postgres.store import PostgresStore
from storage.sqlite.store import SqliteStore

TOKEN = "bench-console-token-0123456789abcdef"
STATUSES = ("complete", "complete", "complete", "expired", "reset", "active")
DAY = 86_400.0
HTML = {"Accept": "text/html"}
RESULTS = ROOT / "bench" / "results"


def rows(count: int, start: float) -> list[tuple[Any, ...]]:
    """Consultations over the last 120 days, one chat each of 5,000 chats (private: the
    chat's person asked), a status mix; at most one active per chat (the database's own
    rule)."""
    out = []
    active: set[str] = set()
    for n in range(count):
        chat = f"tg:{n % 5000}"
        status = STATUSES[n % len(STATUSES)]
        if status == "active":
            if chat in active:
                status = "expired"
            active.add(chat)
        at = start + n * (120 * DAY / count)
        request = f"Question {n}: how should I plan the {('garden', 'budget', 'trip')[n % 3]}?"
        out.append((str(uuid.uuid4()), chat, status, 3, 3, request, at, at + 60, chat))
    return out


MODELS = ("gpt-4o-mini", "gpt-4o")
KINDS = ("round", "final", "follow_up")


def usage_rows(people: int, days: int, today: float) -> list[tuple[Any, ...]]:
    """The person-scope and chat-scope rows of `usage_daily` for `people` people (`tg:<n>`,
    in their private chat `tg:<n>`): each active on a number of the last `days` days drawn
    so most come on a few days and some on most of them (the last day always today for
    one in twenty), 2-3 rows a day (models × kinds of call)."""
    draw = random.Random(20261126)
    out = []
    for n in range(people):
        key = f"tg:{n}"
        active = min(days, max(1, int(draw.paretovariate(1.2) * 3)))
        chosen = set(draw.sample(range(days), active))
        if n % 20 == 0:
            chosen.add(0)
        for back in chosen:
            day = time.strftime("%Y-%m-%d", time.gmtime(today - back * DAY))
            for model, kind in draw.sample([(m, k) for m in MODELS for k in KINDS], 2 + n % 2):
                prompt, completion = draw.randint(200, 4000), draw.randint(50, 1500)
                cost = (prompt + completion) * 1e-6
                for scope in ("person", "chat"):
                    out.append((scope, key, day, model, kind, prompt, completion, 1, 0, cost))
    return out


def people_extras(people: int, today: float) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Quota overrides for one person in fifty (some exempt), and today's consultation
    starts for one in twenty."""
    day = time.strftime("%Y-%m-%d", time.gmtime(today))
    overrides = [(f"tg:{n}", None if n % 100 == 0 else 50_000, today) for n in range(0, people, 50)]
    starts = [(f"tg:{n}", day, 1 + n % 3) for n in range(0, people, 20)]
    return overrides, starts


# Each person's last day charged, as their charges would have left it.
PERSON_ACTIVITY = (
    "INSERT INTO person_activity (person, last_day) SELECT scope_key, MAX(day)"
    " FROM usage_daily WHERE scope_kind = 'person' GROUP BY scope_key"
)
USAGE_COLUMNS = [
    "scope_kind",
    "scope_key",
    "day",
    "model",
    "kind",
    "prompt_tokens",
    "completion_tokens",
    "calls",
    "estimated_calls",
    "cost",
]


@dataclass(frozen=True)
class People:
    usage: list[tuple[Any, ...]]
    overrides: list[tuple[Any, ...]]
    starts: list[tuple[Any, ...]]


INSERT = (
    "INSERT INTO consultations (id, chat_key, status, max_rounds, current_round,"
    " initial_request, created_at, last_activity_at, person) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
MESSAGE = (
    "INSERT INTO messages (consultation_id, seq, role, text, created_at)"
    " VALUES (?, 1, 'user', ?, ?)"
)


async def seed_sqlite(path: Path, data: list[tuple[Any, ...]], people: People) -> None:
    store = await SqliteStore.open(path)  # the schema, by its migrations
    await store.close()
    db = sqlite3.connect(path)
    with db:
        db.executemany(INSERT, data)
        db.executemany(MESSAGE, [(r[0], r[5], r[6]) for r in data])
        db.executemany(
            f"INSERT INTO usage_daily ({', '.join(USAGE_COLUMNS)}) VALUES ({', '.join('?' * 10)})",
            people.usage,
        )
        db.execute(PERSON_ACTIVITY)
        db.executemany(
            "INSERT INTO quota_overrides (person, daily_tokens, updated_at) VALUES (?, ?, ?)",
            people.overrides,
        )
        db.executemany(
            "INSERT INTO consultation_starts (person, day, started) VALUES (?, ?, ?)",
            people.starts,
        )
    db.execute("ANALYZE")
    db.close()


async def seed_postgres(url: str, data: list[tuple[Any, ...]], people: People) -> None:
    store = await PostgresStore.open(url, pool_size=2)
    await store.close()
    connection = await asyncpg.connect(url)
    try:
        await connection.copy_records_to_table(
            "consultations",
            records=data,
            columns=[
                "id",
                "chat_key",
                "status",
                "max_rounds",
                "current_round",
                "initial_request",
                "created_at",
                "last_activity_at",
                "person",
            ],
        )
        await connection.copy_records_to_table(
            "messages",
            records=[(r[0], 1, "user", r[5], r[6]) for r in data],
            columns=["consultation_id", "seq", "role", "text", "created_at"],
        )
        await connection.copy_records_to_table(
            "usage_daily", records=people.usage, columns=USAGE_COLUMNS
        )
        await connection.execute(PERSON_ACTIVITY)
        await connection.copy_records_to_table(
            "quota_overrides",
            records=people.overrides,
            columns=["person", "daily_tokens", "updated_at"],
        )
        await connection.copy_records_to_table(
            "consultation_starts", records=people.starts, columns=["person", "day", "started"]
        )
        await connection.execute("ANALYZE")
    finally:
        await connection.close()


async def timed(http: aiohttp.ClientSession, url: str, repeat: int) -> dict[str, float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        async with http.get(url, headers=HTML) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"{url}: {response.status}")
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {
        "p50": statistics.median(times),
        "p95": times[min(len(times) - 1, round(0.95 * (len(times) - 1)))],
        "max": times[-1],
    }


async def measure(base: str, repeat: int, deep: int) -> dict[str, dict[str, float]]:
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        for _ in range(100):
            try:
                async with http.get(f"{base}/admin/login", headers=HTML) as response:
                    form = await response.text()
                    if response.status == 200:
                        break
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.2)
        else:
            raise RuntimeError("the server did not start")
        login = re.search(r'name="login" value="([^"]*)"', form)
        assert login is not None
        async with http.post(
            f"{base}/admin/login", data={"login": login.group(1), "token": TOKEN}
        ) as response:
            assert response.status == 200, response.status
        url = f"{base}/admin/consultations"
        for _ in range(deep):  # follow "Older" to a page deep in the list
            async with http.get(url, headers=HTML) as response:
                older = re.search(r'href="([^"]+)" rel="next"', await response.text())
            assert older is not None
            url = base + older.group(1).replace("&amp;", "&")
        async with http.get(f"{base}/admin/consultations", headers=HTML) as response:
            first = re.search(r'href="(/admin/consultations/[^"]+)"', await response.text())
        assert first is not None
        people = f"{base}/admin/people"
        for _ in range(deep):  # follow "Next page" to a page deep in the people list
            async with http.get(people, headers=HTML) as response:
                following = re.search(r'href="(/admin/people\?[^"]+)"', await response.text())
            assert following is not None
            people = base + following.group(1).replace("&amp;", "&")
        pages = {
            "first page": f"{base}/admin/consultations",
            f"page {deep + 1}": url,
            "status=active": f"{base}/admin/consultations?status=active",
            "one chat": f"{base}/admin/consultations?chat=tg%3A4242",
            "one person": f"{base}/admin/consultations?person=tg%3A4242",
            "one week": f"{base}/admin/consultations?since=2026-09-01&until=2026-09-07",
            "text, common": f"{base}/admin/consultations?q=garden",
            "text, in every request": f"{base}/admin/consultations?q=how+should+I+plan+the",
            "text, in a few requests": f"{base}/admin/consultations?q=Question+4242",
            "text, 2 characters": f"{base}/admin/consultations?q=zq",
            "text, absent": f"{base}/admin/consultations?q=no-such-words",
            "transcript": base + first.group(1),
            "people: first page": f"{base}/admin/people",
            f"people: page {deep + 1}": people,
            "people: search, a few": f"{base}/admin/people?q=4242",
            "people: search, none": f"{base}/admin/people?q=nobody",
            "people: one person": f"{base}/admin/people/tg%3A4242",
        }
        for page_url in pages.values():  # warm-up
            await timed(http, page_url, 2)
        return {name: await timed(http, page_url, repeat) for name, page_url in pages.items()}


async def run(args: argparse.Namespace, procs: Processes, scratch: Path) -> dict[str, Any]:
    start = time.time() - 120 * DAY
    data = rows(args.count, start)
    now = time.time()
    overrides, starts = people_extras(args.people, now)
    people = People(usage_rows(args.people, args.usage_days, now), overrides, starts)
    env = {
        "ADMIN_TOKEN": TOKEN,
        "OPENAI_API_KEY": "bench",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "API_ACCESS_LOG": "false",
        "LOG_LEVEL": "WARNING",
        # The seeded consultations go back 120 days: kept, not purged when the server starts.
        "RETENTION_DAYS": "3650",
    }
    admin: asyncpg.Connection | None = None
    tag = f"bench_{uuid.uuid4().hex[:10]}"
    try:
        seeding = time.perf_counter()
        if args.postgres:
            admin_url = test_database_url()
            admin = await asyncpg.connect(admin_url, timeout=5)
            await admin.execute(f'CREATE SCHEMA "{tag}"')
            env["DATABASE_URL"] = with_settings(admin_url, search_path=tag)
            await seed_postgres(env["DATABASE_URL"], data, people)
        else:
            env["DB_PATH"] = str(scratch / "console.sqlite3")
            await seed_sqlite(Path(env["DB_PATH"]), data, people)
        seeded = time.perf_counter() - seeding
        port = free_port()
        env["API_PORT"] = str(port)
        procs.start("api", ["-m", "api"], env)
        pages = await measure(f"http://127.0.0.1:{port}", args.repeat, args.deep)
    finally:
        if admin is not None:
            await admin.execute(f'DROP SCHEMA IF EXISTS "{tag}" CASCADE')
            await admin.close()
    return {
        "store": "postgres" if args.postgres else "sqlite",
        "consultations": args.count,
        "people": args.people,
        "usage_days": args.usage_days,
        "usage_rows": len(people.usage),
        "seed_seconds": seeded,
        "pages_ms": pages,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--people", type=int, default=5_000, help="people with usage")
    parser.add_argument("--usage-days", type=int, default=120, help="days of usage history")
    parser.add_argument("--repeat", type=int, default=30, help="loads of each page")
    parser.add_argument("--deep", type=int, default=40, help="pages followed to a deep one")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL (TEST_DATABASE_URL)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
        procs = Processes(Path(tmp))
        try:
            result = asyncio.run(run(args, procs, Path(tmp)))
        except KeyboardInterrupt:
            return 130
        finally:
            procs.stop_all()
    print(
        f"console list, {result['store']}, {result['consultations']:,} consultations, "
        f"{result['people']:,} people over {result['usage_days']} days "
        f"({result['usage_rows']:,} usage rows; seeded in {result['seed_seconds']:.0f} s):"
        " ms per page load, p50 / p95 / max"
    )
    for name, t in result["pages_ms"].items():
        print(f"  {name:28} {t['p50']:7.1f} {t['p95']:7.1f} {t['max']:7.1f}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / time.strftime(f"console-list-{result['store']}-%Y%m%d-%H%M%S.json")
    path.write_text(json.dumps(result, indent=1))
    print(f"results in {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
