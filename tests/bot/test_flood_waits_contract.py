"""The flood waits contract (`bot.transport.flood.FloodWaits`): what every implementation does, run
over each one in `tests.port_contract.BACKENDS` — in memory, and on PostgreSQL. A chat
paused for a time receives nothing until then; a later, shorter pause does not shorten
it; a pause that is over is forgotten. What only PostgreSQL has (other workers' pauses
read through a short cache, a pause the database would not record) is in
tests/bot/test_flood_shared.py."""

from __future__ import annotations

from tests.port_contract import BACKENDS, Backend, Clock, port_fixture

port = port_fixture(BACKENDS)
"""The implementation under test."""


async def test_a_paused_chat_waits_until_its_pause_ends(port: Backend) -> None:
    clock = Clock()
    waits = port.flood_waits(clock)
    assert await waits.remaining(1) == 0.0
    await waits.pause(1, 30)
    assert await waits.remaining(1) == 30.0
    assert await waits.remaining(2) == 0.0  # other chats are not held
    clock.now += 10
    assert await waits.remaining(1) == 20.0
    clock.now += 20
    assert await waits.remaining(1) == 0.0


async def test_a_shorter_pause_recorded_later_does_not_shorten_the_running_one(
    port: Backend,
) -> None:
    """Told to wait 30 s, then 5 s for the same chat (another send's RetryAfter): the chat
    still waits the 30 s; a longer pause recorded later lengthens it."""
    clock = Clock()
    waits = port.flood_waits(clock)
    await waits.pause(1, 30)
    clock.now += 1
    await waits.pause(1, 5)
    assert await waits.remaining(1) == 29.0
    await waits.pause(1, 40)
    assert await waits.remaining(1) == 40.0
    clock.now += 39
    assert await waits.remaining(1) == 1.0


async def test_pauses_that_are_over_are_forgotten(port: Backend) -> None:
    """Pauses of many chats are held while they run and none is held once all are over."""
    clock = Clock()
    waits = port.flood_waits(clock)
    for chat in range(1, 51):
        await waits.pause(chat, float(chat))
    assert await waits.remaining(50) == 50.0
    assert waits.tracked() == 50
    clock.now += 50
    assert [await waits.remaining(chat) for chat in range(1, 51)] == [0.0] * 50
    assert waits.tracked() == 0
