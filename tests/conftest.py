"""Shared fixtures: the fakes under tests/fakes are plugged in as pytest plugins, and `bot`
is a bot with default settings on a fresh SQLite file (see tests/bot_harness.py)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# The same opt-in as bot/__init__.py, for tests that use telegram without the bot package.
os.environ.setdefault("PTB_TIMEDELTA", "1")

if TYPE_CHECKING:
    from tests.bot_harness import RunningBot
    from tests.fakes.bot_api import FakeBotApi
    from tests.fakes.model_server import FakeModelServer

pytest_plugins = ["tests.fakes.model_server", "tests.fakes.bot_api"]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """This run's PostgreSQL database (tests/postgres.py) goes with the run."""
    from tests.postgres import drop_run_database

    drop_run_database()


@pytest.fixture
async def bot(
    tmp_path: Path, bot_api: FakeBotApi, model_server: FakeModelServer
) -> AsyncIterator[RunningBot]:
    """A running bot with default settings on `tmp_path / "bot.sqlite3"`.

    The harness is imported here, not at the top, so tests that never start a bot do
    not load the application.
    """
    from tests.bot_harness import started_bot

    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server) as running:
        yield running
