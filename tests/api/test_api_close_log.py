"""A flood of connections the server closes on its own (past HTTP_MAX_CONNECTIONS, or too
slow to send their headers) is logged as a count, not a line per connection.

Raw sockets against the real server on 127.0.0.1 (the production runner)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fakes.bot_api import FakeBotApi
from fakes.model_server import FakeModelServer
from tests.api.test_api_read_timeouts import connect
from tests.api.test_api_webhook import settings_for, telegram_app
from tests.api_harness import RunningApi, running_api

FLOOD = 30
CAP = 3


@pytest.fixture
async def api(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> AsyncIterator[RunningApi]:
    """Room for `CAP` connections; headers due within half a second."""
    settings = settings_for(
        tmp_path,
        bot_api,
        model_server,
        http_max_connections=CAP,
        http_header_timeout_seconds=0.5,
    )
    async with running_api(settings, telegram=telegram_app) as running:
        yield running


def server_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("api.server")]


async def test_a_flood_of_slow_clients_is_logged_as_a_count(
    api: RunningApi, caplog: pytest.LogCaptureFixture
) -> None:
    """Thirty clients that never send their headers, closed for it: at most two lines."""
    caplog.set_level(logging.INFO)
    for _ in range(FLOOD // CAP):
        clients = [await connect(api) for _ in range(CAP)]
        for reader, writer in clients:
            assert await asyncio.wait_for(reader.read(), 10) == b""
            writer.close()
    lines = server_lines(caplog)
    assert 1 <= len(lines) <= 2, lines
    assert "sent no complete headers" in lines[0]


async def test_a_flood_past_the_connection_cap_is_logged_as_a_count(
    api: RunningApi, caplog: pytest.LogCaptureFixture
) -> None:
    """Connections past the cap, in spells between which the count falls below it again
    (held ones time out): at most a couple of lines for all of them."""
    caplog.set_level(logging.INFO)
    refused = 0
    for _ in range(4):
        held = [await connect(api) for _ in range(CAP)]
        for _ in range(FLOOD // 4):
            reader, writer = await connect(api)
            assert await asyncio.wait_for(reader.read(), 10) == b""
            writer.close()
            refused += 1
        for reader, writer in held:  # closed by their header deadline: room again
            assert await asyncio.wait_for(reader.read(), 10) == b""
            writer.close()
        await asyncio.sleep(0.05)  # the server counts the closes on its next loop turns
    cap_lines = [line for line in server_lines(caplog) if "(HTTP_MAX_CONNECTIONS)" in line]
    assert 1 <= len(cap_lines) <= 2, cap_lines
    assert refused == 4 * (FLOOD // 4)


async def test_a_flood_past_the_per_address_limit_is_logged_as_a_count(
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One address opening connections past HTTP_MAX_CONNECTIONS_PER_ADDRESS: each is
    closed when accepted, all of them in a line or two that name the setting."""
    caplog.set_level(logging.INFO)
    settings = settings_for(
        tmp_path,
        bot_api,
        model_server,
        http_max_connections_per_address=CAP,
        http_header_timeout_seconds=60,
    )
    async with running_api(settings, telegram=telegram_app) as api:
        held = [await connect(api) for _ in range(CAP + 4)]  # its share, and the probe slots
        try:
            for _ in range(FLOOD):
                reader, writer = await connect(api)
                assert await asyncio.wait_for(reader.read(), 10) == b""
                writer.close()
        finally:
            for _, writer in held:
                writer.close()
    lines = [line for line in server_lines(caplog) if "(HTTP_MAX_CONNECTIONS_PER_ADDRESS)" in line]
    assert 1 <= len(lines) <= 2, lines
