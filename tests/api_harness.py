"""A running API for tests: the production runtime (real SQLite, real openai SDK) under a
real aiohttp server.

Invariant: everything opened by `running_api` is closed when it exits, in reverse
order, and nothing listens anywhere but 127.0.0.1. Store, model client, metrics and
service come from `app.runtime.open_runtime`, wired exactly as in production.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web_runner import BaseRunner

from api.app import ToolStatuses, build_web_app
from api.server import ApiRunner, ReadTimeouts, read_timeouts
from api.webhook import TelegramApp
from app.api_bots import ApiBots
from app.runtime import BOT_MODEL, open_runtime
from app.settings import Settings, load_settings
from core.domain.knowledge import KnowledgeSearch
from core.llm.deadline import DeadlineCompleter
from core.primitives.intake_gate import IntakeGate
from core.turns.engine import Engine
from i18n.document_labels import DOCUMENT_LANGUAGES
from telemetry.metrics import MeteredCompleter, Metrics
from telemetry.supervision import LoopRegistry

if TYPE_CHECKING:
    from app.stores import Store


def api_settings(db_path: Path, model_base_url: str, **overrides: Any) -> Settings:
    """Settings for a test deployment (no `.env`, no SDK retries, API enabled)."""
    values: dict[str, Any] = {
        "openai_api_key": "test-key",
        "openai_base_url": model_base_url,
        "llm_model": "test-model",
        "db_path": db_path,
        "llm_max_retries": 0,
        "llm_timeout_seconds": 10,
        "api_enabled": True,
        "llm_structured_questions": "off",  # structured rounds have tests of their own
        "memory_enabled": False,  # client memory has tests of its own
        "_env_file": None,
    }
    values.update(overrides)
    return load_settings(**values)


class ApiTestServer(TestServer):
    """`TestServer` with the production runner (JSON protocol errors, no version banner,
    the deployment's read deadlines)."""

    def __init__(
        self, app: web.Application, *, read_timeouts: ReadTimeouts | None = None, **kwargs: Any
    ) -> None:
        super().__init__(app, **kwargs)
        self._read_timeouts = read_timeouts

    async def _make_runner(self, **kwargs: Any) -> BaseRunner:
        return ApiRunner(self.app, read_timeouts=self._read_timeouts, **kwargs)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Arrivals:
    """Counts requests as they enter the app, so a test can wait for them to arrive.

    The counting middleware is the outermost one: a request is counted before any
    of the app's own work on it, and every request is counted, refused or not.
    """

    count: int = 0
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.count += 1
        async with self._changed:
            self._changed.notify_all()
        return await handler(request)

    async def wait(self, count: int, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Wait until `count` requests in all have entered the app."""
        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(lambda: self.count >= count)
        except TimeoutError:
            raise AssertionError(f"{self.count} of {count} requests reached the API") from None


@dataclass
class RunningApi:
    settings: Settings
    store: Store
    engine: Engine
    metrics: Metrics
    client: TestClient  # type: ignore[type-arg]
    deadline: DeadlineCompleter
    arrivals: Arrivals
    loops: LoopRegistry
    telegram: TelegramApp | None = None

    @contextlib.contextmanager
    def first_text_deadline(self, seconds: float) -> Iterator[None]:
        """Within the block, a model call gives up after `seconds` without text.

        For a call the test holds forever at the fake model server: only that call
        runs inside the block, so no call meant to succeed can meet the short
        deadline, however loaded the machine is.
        """
        before = self.deadline.first_token_seconds
        self.deadline.first_token_seconds = seconds
        try:
            yield
        finally:
            self.deadline.first_token_seconds = before


TelegramFactory = Callable[[Settings, Engine], TelegramApp]


@contextlib.asynccontextmanager
async def running_api(
    settings: Settings,
    *,
    telegram: TelegramFactory | None = None,
    knowledge: KnowledgeSearch | None = None,
    tool_statuses: ToolStatuses | None = None,
    turn_intake: IntakeGate | None = None,
) -> AsyncIterator[RunningApi]:
    """The production runtime (`app.runtime.open_runtime`, without its periodic jobs) and
    an HTTP server over it, with a client bound to it.

    `telegram` builds the PTB application over the service (for the webhook route);
    starting and stopping it is the caller's business. `knowledge` is the knowledge base
    the consultations read (`tests.knowledge_search.ListedKnowledge`); `tool_statuses`
    what `/healthz` reports of the tool servers (the runtime's, as in production, unless
    given); `turn_intake` the process's intake gate (the runtime's, TURN_INTAKE_SLOTS, unless
    given).
    """
    async with open_runtime(settings, background=False, knowledge=knowledge) as runtime:
        application = telegram(settings, runtime.engine) if telegram is not None else None
        app = build_web_app(
            settings.api_config(),
            runtime.engine,
            document_languages=DOCUMENT_LANGUAGES,
            store=runtime.store,
            telegram_application=application,
            metrics=runtime.metrics,
            intake=runtime.intake,
            loops=runtime.loops,
            tool_statuses=runtime.tool_statuses if tool_statuses is None else tool_statuses,
            stars=runtime.stars,
            bots=ApiBots(runtime),
            turn_intake=turn_intake or runtime.turn_intake,
        )
        arrivals = Arrivals()
        app.middlewares.insert(0, arrivals.middleware)
        timeouts = read_timeouts(settings.api_config())
        client = TestClient(ApiTestServer(app, host="127.0.0.1", read_timeouts=timeouts))
        metered = runtime.models[BOT_MODEL]
        assert isinstance(metered, MeteredCompleter)
        deadline = metered.inner
        assert isinstance(deadline, DeadlineCompleter)
        try:
            await client.start_server()
            yield RunningApi(
                settings,
                runtime.store,
                runtime.engine,
                runtime.metrics,
                client,
                deadline,
                arrivals,
                runtime.loops,
                application,
            )
        finally:
            await client.close()
