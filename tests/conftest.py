"""Shared fixtures (tests/README.md lists them): the fakes under fakes are plugged in as
pytest plugins; `bot` is a bot on a fresh SQLite file (see tests/bot_harness.py), with the
settings a test's `bot_settings` marker gives; `api` the HTTP API as production wires it
(see tests/api_harness.py), with the settings a test's `api_settings` marker gives;
`store`, `completer`, `service` and `engine` the consultation service on a real SQLite file
and the real openai SDK (see tests/service_harness.py). `kind` and `database` run a test
once per store implementation, each on a fresh database (tests/store_contract.py, a plugin
too); under tests/contract `store` is that kind's store instead (tests/contract/conftest.py).

The harnesses are imported inside the fixtures, so a test that uses none of them does not
load the bot, the API or the service (the stores are loaded with tests/store_contract.py)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# The same opt-in as bot/__init__.py, for tests that use telegram without the bot package.
os.environ.setdefault("PTB_TIMEDELTA", "1")

if TYPE_CHECKING:
    from core.llm.llm import OpenAICompleter
    from core.turns.engine import Engine
    from fakes.bot_api import FakeBotApi
    from fakes.model_server import FakeModelServer
    from storage.sqlite.store import SqliteStore
    from tests.api_harness import RunningApi
    from tests.bot_harness import RunningBot
    from tests.service_harness import Clock, MakeEngine

pytest_plugins = [
    "fakes.model_server",
    "fakes.bot_api",
    "tests.store_contract",
    "tests.postgres_report",
]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "api_settings(**overrides): the settings the `api` fixture runs with, beyond the test "
        "defaults (tests/api_harness.py api_settings); the marker closest to the test counts",
    )
    config.addinivalue_line(
        "markers",
        "bot_settings(**overrides): the settings the `bot` fixture runs with, beyond the test "
        "defaults (tests/bot_harness.py started_bot); the marker closest to the test counts",
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """This run's PostgreSQL database (tests/postgres.py) goes with the run."""
    from tests.postgres import drop_run_database

    drop_run_database()


@pytest.fixture
async def bot(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
) -> AsyncIterator[RunningBot]:
    """A running bot on `tmp_path / "bot.sqlite3"`, with the settings of the `bot_settings`
    marker closest to the test (a test's own, else its module's `pytestmark`).

    The harness is imported here, not at the top, so tests that never start a bot do
    not load the application.
    """
    from tests.bot_harness import started_bot

    marker = request.node.get_closest_marker("bot_settings")
    overrides = marker.kwargs if marker is not None else {}
    async with started_bot(tmp_path / "bot.sqlite3", bot_api, model_server, **overrides) as running:
        yield running


@pytest.fixture
async def api(
    request: pytest.FixtureRequest, tmp_path: Path, model_server: FakeModelServer
) -> AsyncIterator[RunningApi]:
    """The HTTP API on `tmp_path / "api.sqlite3"` and the fake model server, with the
    settings of the `api_settings` marker closest to the test (a test's own, else its
    module's `pytestmark`)."""
    from tests.api_harness import api_settings, running_api

    marker = request.node.get_closest_marker("api_settings")
    overrides = marker.kwargs if marker is not None else {}
    settings = api_settings(tmp_path / "api.sqlite3", model_server.base_url, **overrides)
    async with running_api(settings) as running:
        yield running


@pytest.fixture
def model(model_server: FakeModelServer) -> FakeModelServer:
    """The fake model server; `enqueue` scripts replies, `requests` holds what it was sent."""
    return model_server


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Where `store` keeps its SQLite file."""
    return tmp_path / "db.sqlite3"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteStore]:
    """A real SQLite store at `db_path`, closed after the test."""
    from storage.sqlite.store import SqliteStore

    opened = await SqliteStore.open(db_path)
    yield opened
    await opened.close()


@pytest.fixture
async def completer(model_server: FakeModelServer) -> AsyncIterator[OpenAICompleter]:
    """The production model client on the fake model server (chat completions over the
    aiohttp wire); no retries, so one scripted error is one failure."""
    from core.llm.llm import OpenAICompleter
    from tests.wires import wire_for

    client = OpenAICompleter(
        api_key="test-key",
        base_url=model_server.base_url,
        timeout=30,
        max_retries=0,
        wire=wire_for("aiohttp", 30),
    )
    yield client
    await client.close()


@pytest.fixture
def clock() -> Clock:
    """The service's clock: tests move `clock.now`."""
    from tests.service_harness import Clock

    return Clock()


@pytest.fixture
def service(store: SqliteStore, completer: OpenAICompleter, clock: Clock) -> Engine:
    """The engine on `store`, `completer` and `clock`, default settings."""
    from tests.service_harness import make_service

    return make_service(store, completer, clock)


@pytest.fixture
def engine(store: SqliteStore, completer: OpenAICompleter) -> MakeEngine:
    """Builds engines on `store` and `completer` with `EngineConfig` overrides."""
    from tests.service_harness import Clock, make_service

    return lambda **config: make_service(store, completer, Clock(), **config)
