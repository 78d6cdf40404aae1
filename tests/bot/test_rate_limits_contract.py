"""The per-user rate limit contract (`bot.updates.access.UserRateLimits`): what every implementation
does, run over each one in `tests.port_contract.RATE_BACKENDS` — in memory, and on
PostgreSQL for messages and for button presses. A limit of N means at most N counted
events per user in any 60-second window (a sliding window), a refusal counts nothing and
says how long until the window has room, and a refused user is told so once a window.
What only PostgreSQL has (several workers at once, forgetting idle users) is in
tests/storage/test_pg_shared.py."""

from __future__ import annotations

import asyncio

import pytest

from tests.port_contract import RATE_BACKENDS, Backend, Clock, port_fixture

port = port_fixture(RATE_BACKENDS)
"""The implementation under test."""


async def test_at_most_n_events_in_a_window_then_none_until_it_has_room(port: Backend) -> None:
    """Three a minute: the fourth waits the whole window, and still waits a second before
    it ends (nothing comes back earlier); when the window has passed, three pass again."""
    clock = Clock()
    limits = port.rate_limits(3, clock)
    assert [await limits.check(7) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert await limits.check(7) == pytest.approx(60.0)
    clock.now += 20
    assert await limits.check(7) == pytest.approx(40.0)
    clock.now += 39
    assert await limits.check(7) == pytest.approx(1.0)
    clock.now += 1
    assert [await limits.check(7) for _ in range(4)][:3] == [0.0, 0.0, 0.0]


async def test_the_window_slides_over_each_event(port: Backend) -> None:
    """Events at 0, 20 and 40 s: at 50 s the next waits until the first leaves the window
    (60 s), then until the second does (80 s)."""
    clock = Clock()
    start = clock.now
    limits = port.rate_limits(3, clock)
    for at in (0, 20, 40):
        clock.now = start + at
        assert await limits.check(7) == 0.0
    clock.now = start + 50
    assert await limits.check(7) == pytest.approx(10.0)
    clock.now = start + 60
    assert await limits.check(7) == 0.0
    clock.now = start + 61
    assert await limits.check(7) == pytest.approx(19.0)
    clock.now = start + 80
    assert await limits.check(7) == 0.0


async def test_a_steady_sender_gets_n_a_minute_never_more(port: Backend) -> None:
    """One message a second for two minutes at a limit of 5: exactly 5 pass in each minute,
    the first five seconds of it, and no 60-second window holds more than 5."""
    clock = Clock()
    start = clock.now
    limits = port.rate_limits(5, clock)
    passed = []
    for second in range(120):
        clock.now = start + second
        if await limits.check(1) == 0.0:
            passed.append(second)
    assert passed == [0, 1, 2, 3, 4, 60, 61, 62, 63, 64]


async def test_a_refusal_counts_nothing(port: Backend) -> None:
    """One a minute: refusals inside the window do not push the next allowed event back."""
    clock = Clock()
    limits = port.rate_limits(1, clock)
    assert await limits.check(7) == 0.0
    for _ in range(5):
        clock.now += 10
        assert await limits.check(7) > 0
    clock.now += 10
    assert await limits.check(7) == 0.0


async def test_each_user_has_a_window_of_their_own(port: Backend) -> None:
    clock = Clock()
    limits = port.rate_limits(1, clock)
    assert await limits.check(7) == 0.0
    assert await limits.check(7) > 0
    assert await limits.check(8) == 0.0
    assert await limits.check(-1001) == 0.0  # a group counted as one person


async def test_a_limit_of_zero_never_refuses(port: Backend) -> None:
    limits = port.rate_limits(0, Clock())
    assert [await limits.check(1) for _ in range(100)] == [0.0] * 100


async def test_checks_at_once_count_exactly_the_limit(port: Backend) -> None:
    """Forty checks of one user at the same moment: five pass, each refusal says the whole
    window."""
    limits = port.rate_limits(5, Clock())
    waits = await asyncio.gather(*(limits.check(1) for _ in range(40)))
    assert waits.count(0.0) == 5
    assert sorted(waits)[5:] == [pytest.approx(60.0)] * 35


async def test_a_refused_user_is_warned_once_a_window(port: Backend) -> None:
    """The first warning of a window is True, the others False, per user, whether or not
    the user was refused (other refusals share the mark); a window later, True again."""
    clock = Clock()
    limits = port.rate_limits(1, clock)
    assert [
        await limits.should_warn(7),
        await limits.should_warn(7),
        await limits.should_warn(8),
    ] == [True, False, True]
    assert await limits.check(7) == 0.0 and await limits.check(7) > 0
    clock.now += 59
    assert not await limits.should_warn(7)
    clock.now += 1
    assert await limits.should_warn(7)
    assert not await limits.should_warn(7)
