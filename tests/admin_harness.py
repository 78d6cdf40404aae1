"""The operator's console for tests: the production runtime on a real store (SQLite or
PostgreSQL, `tests.store_contract.STORE_KINDS`) under a real aiohttp server on 127.0.0.1,
mounted as the deployment mounts it (`app.admin_mount.console_mounts`), with a clock the
test moves and a client whose cookie jar signs in like a browser.

Invariant: everything opened is closed when `running_console` exits; nothing listens
anywhere but 127.0.0.1 and no model is called.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp.test_utils import TestClient

from api.app import build_web_app
from api.server import read_timeouts
from app.admin_mount import console_mounts
from app.runtime import open_runtime
from app.settings import Settings, load_settings
from core.domain.clarifying import ClarifyingRound, Question
from core.domain.consultation import Consultation, Message, Role, Status, Usage
from core.domain.tools import ToolServerStatus
from core.turns.engine import Engine
from i18n.document_labels import DOCUMENT_LANGUAGES
from tests.api_harness import ApiTestServer
from tests.store_contract import StoreKind

if TYPE_CHECKING:
    from app.stores import Store

TOKEN = "console-token-for-tests-0123456789"
HTML = {"Accept": "text/html,application/xhtml+xml"}


class Clock:
    """Wall time the test moves forward by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@dataclass
class Console:
    client: TestClient  # type: ignore[type-arg]
    store: Store
    engine: Engine
    clock: Clock
    settings: Settings

    async def sign_in(self, token: str = TOKEN) -> int:
        """Fill in the sign-in form as a browser does; the status of its answer."""
        form = await self.client.get("/admin/login", headers=HTML)
        login = field(await form.text(), "login")
        answer = await self.client.post(
            "/admin/login", data={"login": login, "token": token}, allow_redirects=False
        )
        return answer.status

    async def csrf(self, path: str = "/admin/consultations") -> str:
        page = await self.client.get(path, headers=HTML)
        return field(await page.text(), "csrf")

    async def page(self, path: str) -> tuple[int, str]:
        response = await self.client.get(path, headers=HTML, allow_redirects=False)
        return response.status, await response.text()


def field(html: str, name: str) -> str:
    """The value of the hidden form field `name` in a page."""
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, f"no {name} field in the page"
    return found.group(1)


def console_settings(kind: StoreKind, address: str, **overrides: Any) -> Settings:
    store: dict[str, Any] = (
        {"db_path": Path(address)} if kind.name == "sqlite" else {"database_url": address}
    )
    values: dict[str, Any] = {
        "openai_api_key": "test-key",
        "openai_base_url": "http://127.0.0.1:9/v1",  # never called
        "llm_model": "test-model",
        "llm_max_retries": 0,
        "memory_enabled": False,
        "admin_token": TOKEN,
        "_env_file": None,
        **store,
    }
    values.update(overrides)
    return load_settings(**values)


@contextlib.asynccontextmanager
async def running_console(
    settings: Settings, *, tool_statuses: Callable[[], Sequence[ToolServerStatus]] | None = None
) -> AsyncIterator[Console]:
    clock = Clock()
    async with open_runtime(settings, background=False) as runtime:
        config = settings.api_config()
        app = build_web_app(
            config,
            runtime.engine,
            document_languages=DOCUMENT_LANGUAGES,
            store=runtime.store,
            metrics=runtime.metrics,
            mounts=console_mounts(settings, runtime, clock=clock, tool_statuses=tool_statuses),
        )
        # The deployment's read deadlines and connection limits, as `start_web_server` runs.
        server = ApiTestServer(app, host="127.0.0.1", read_timeouts=read_timeouts(config))
        client = TestClient(server)
        try:
            await client.start_server()
            yield Console(client, runtime.store, runtime.engine, clock, settings)
        finally:
            await client.close()


def consultation(
    request: str = "How do I choose a database?",
    *,
    chat_key: str = "tg:42",
    at: float = 1_764_000_000.0,
    final: str | None = "Use **PostgreSQL** for several writers.",
    options: tuple[str, ...] = ("One", "Several"),
    answer: str = "Several",
    clarifying: int = 1,
) -> Consultation:
    """A stored consultation with `clarifying` rounds of questions, the first structured
    and answered by option, then (unless `final` is None) its final answer: what the
    transcript page shows. Each reply of the model is a round, so a completed one used
    `clarifying` + 1."""
    import uuid

    messages = [Message(Role.USER, request, at, author="Ann")]
    for number in range(1, clarifying + 1):
        when = at + len(messages)
        if number == 1:
            round_ = ClarifyingRound("A question first.", (Question("How many writers?", options),))
            messages.append(
                Message(Role.ASSISTANT, round_.text, when, usage=Usage(100, 20), questions=round_)
            )
            reply = f"How many writers? — {answer}"
        else:
            asked = f"Question {number}: anything else I should know?"
            messages.append(Message(Role.ASSISTANT, asked, when, usage=Usage(100, 20)))
            reply = "Nothing else."
        messages.append(Message(Role.USER, reply, when + 1, author="Ann"))
    if final is not None:
        messages.append(Message(Role.ASSISTANT, final, at + len(messages), usage=Usage(300, 200)))
    rounds = clarifying + (final is not None)
    return Consultation(
        id=str(uuid.uuid4()),
        chat_key=chat_key,
        max_rounds=max(2, rounds),
        initial_request=request,
        created_at=at,
        last_activity_at=at + 2 * clarifying + 1,
        current_round=rounds,
        status=Status.COMPLETE if final is not None else Status.ACTIVE,
        messages=messages,
    )
