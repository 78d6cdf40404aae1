"""Brute force against the console's sign-in: parallel sign-ins whose bodies are held
back compare at most `failed_sign_ins` tokens per address per window — on SQLite in one
worker, on PostgreSQL across two workers sharing the count — each comparison written to
the audit log; attempts that compare no wrong token are given back."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from admin.auth import counted_as
from admin.config import LOGIN_COOKIE
from admin.throttle import SignInThrottle
from app.runtime import open_runtime
from storage.postgres.cluster.sign_ins import PostgresSignIns
from tests.admin_harness import Console, console_settings, running_console
from tests.store_contract import STORE_KINDS, StoreKind

SQLITE, POSTGRES = STORE_KINDS
ATTEMPTS = 200
LIMIT = 5
WRONG = b"login=x&token=wrong-token-guess"


async def held_back_sign_ins(consoles: list[Console], count: int) -> list[int]:
    """`count` sign-ins with a wrong token, spread over `consoles`, all sent at once: each
    request's headers at once, its body only once every request's headers are sent (as
    the attack holds them back); the status of each answer."""
    gate = asyncio.Event()
    sent = 0

    async def one(console: Console) -> int:
        nonlocal sent
        url = console.client.make_url("/admin/login")
        assert url.host is not None and url.port is not None
        reader, writer = await asyncio.open_connection(url.host, url.port)
        writer.write(
            (
                f"POST {url.path} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\n"
                f"Content-Length: {len(WRONG)}\r\n"
                f"Cookie: {LOGIN_COOKIE}=x\r\n"  # the form's double-submit token: login=x
                "Connection: close\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        answer = asyncio.create_task(reader.readline())  # an answer may come before the body
        sent += 1
        if sent == count:
            gate.set()
        await gate.wait()
        with contextlib.suppress(ConnectionError):
            writer.write(WRONG)
            await writer.drain()
        status_line = await answer
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
        return int(status_line.split()[1])

    return await asyncio.gather(*(one(consoles[n % len(consoles)]) for n in range(count)))


async def failed_entries(console: Console) -> list[str]:
    entries = await console.store.audit_log(before_id=None, limit=ATTEMPTS + 10)
    return [e.detail for e in entries if e.action == "sign_in_failed"]


@contextlib.asynccontextmanager
async def workers(kind: StoreKind, address: str, count: int) -> AsyncIterator[list[Console]]:
    """`count` console workers on one database, as several processes would serve it, each
    taking every sign-in of the test's one address at once: past its per-address connection
    limit a server would close them before the throttle is reached."""
    async with contextlib.AsyncExitStack() as stack:
        settings = console_settings(kind, address, http_max_connections_per_address=ATTEMPTS)
        yield [await stack.enter_async_context(running_console(settings)) for _ in range(count)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("store_kind", "count"), [(SQLITE, 1), (POSTGRES, 2)], ids=["sqlite-one", "postgres-two"]
)
async def test_parallel_sign_ins_compare_at_most_the_limit_per_window(
    tmp_path: Path, store_kind: StoreKind, count: int
) -> None:
    address = await store_kind.new_database(tmp_path)
    try:
        async with workers(store_kind, address, count) as consoles:
            statuses = await held_back_sign_ins(consoles, ATTEMPTS)
            assert Counter(statuses) == {401: LIMIT, 429: ATTEMPTS - LIMIT}
            failed = await failed_entries(consoles[0])
            assert failed == ["from 127.0.0.1"] * LIMIT  # one entry per comparison
            # The window is shared: every worker now refuses even the right token.
            for console in consoles:
                assert await console.sign_in() == 429
            for console in consoles:
                console.clock.now += 901
            for console in consoles:
                assert await console.sign_in() == 303
    finally:
        await store_kind.drop_database(address)


async def test_sign_ins_that_compare_no_wrong_token_are_not_counted(tmp_path: Path) -> None:
    """Signing in rightly, or with a forged form, ten times in a row is never refused."""
    address = await SQLITE.new_database(tmp_path)
    async with running_console(console_settings(SQLITE, address)) as c:
        for _ in range(10):
            assert await c.sign_in() == 303
            c.client.session.cookie_jar.clear()  # a new browser: the form again
        for _ in range(10):
            response = await c.client.post(
                "/admin/login", data={"token": "guess"}, allow_redirects=False
            )
            assert response.status == 403  # no sign-in form token: refused unread
        assert await c.sign_in("wrong-token-guess") == 401
        assert await c.sign_in() == 303
        assert len(await failed_entries(c)) == 1


async def test_the_memory_throttle_gives_back_and_forgets() -> None:
    now = [0.0]
    throttle = SignInThrottle(2, 60.0, clock=lambda: now[0], max_addresses=100)
    for n in range(10_000):
        await throttle.reserve(f"10.0.{n // 256}.{n % 256}")
    assert len(throttle) == 100  # the least recently counted forgotten
    first = await throttle.reserve("a")
    second = await throttle.reserve("a")
    assert (await throttle.reserve("a")).at is None
    assert (await throttle.reserve("a")).wait == 60.0
    assert first.at is not None and second.at is not None
    await throttle.release("a", first.at)
    assert (await throttle.reserve("a")).at == 0.0
    now[0] = 61.0
    assert (await throttle.reserve("a")).at == 61.0


async def test_the_memory_throttle_bounds_the_failures_logged_per_window() -> None:
    now = [0.0]
    throttle = SignInThrottle(5, 60.0, clock=lambda: now[0], max_audited=3)
    assert [await throttle.take_audit_slot() for _ in range(5)] == [2, 1, 0, None, None]
    now[0] = 60.0
    assert await throttle.take_audit_slot() == 2


async def test_the_shared_count_gives_back_one_attempt_and_forgets_idle_addresses(
    tmp_path: Path,
) -> None:
    address = await POSTGRES.new_database(tmp_path)
    settings = console_settings(POSTGRES, address)
    now = [1_000.0]
    try:
        async with open_runtime(settings, background=False) as runtime:
            assert runtime.shared_pool is not None
            one = PostgresSignIns(runtime.shared_pool, 2, 60.0, clock=lambda: now[0])
            other = PostgresSignIns(runtime.shared_pool, 2, 60.0, clock=lambda: now[0])
            first, second = await one.reserve("10.0.0.1"), await other.reserve("10.0.0.1")
            assert first.at == second.at == 1_000.0  # the same time, counted twice
            now[0] = 1_010.0
            refused = await other.reserve("10.0.0.1")
            assert refused.at is None and refused.wait == pytest.approx(50.0)
            assert (await one.reserve("10.0.0.2")).at == 1_010.0  # another address
            await one.release("10.0.0.1", 1_000.0)  # one of the two, not both
            assert (await other.reserve("10.0.0.1")).at == 1_010.0
            assert (await one.reserve("10.0.0.1")).at is None
            now[0] = 1_071.0
            assert await one.forget_idle() == 2
            assert (await other.reserve("10.0.0.1")).at == 1_071.0
            # The failures logged: a budget the workers share, as an address's attempts.
            one = PostgresSignIns(runtime.shared_pool, 2, 60.0, clock=lambda: now[0], max_audited=3)
            other = PostgresSignIns(
                runtime.shared_pool, 2, 60.0, clock=lambda: now[0], max_audited=3
            )
            left = [await (one, other)[n % 2].take_audit_slot() for n in range(5)]
            assert left == [2, 1, 0, None, None]
            now[0] = 1_131.0
            assert await other.take_audit_slot() == 2
    finally:
        await POSTGRES.drop_database(address)


@pytest.mark.parametrize(
    ("address", "counted"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8::1", "2001:db8::/64"),
        ("2001:db8::ffff:0:1", "2001:db8::/64"),  # another address of the same host's /64
        ("2001:db8:0:1::1", "2001:db8:0:1::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("fe80::1%eth0", "fe80::/64"),
        ("unknown", "unknown"),
    ],
)
def test_an_ipv6_host_counts_as_its_64_network(address: str, counted: str) -> None:
    assert counted_as(address) == counted
