"""Several `python -m bot` worker processes on one PostgreSQL schema, for the cluster tests.

Invariants:
- every worker gets a clean environment (see tests/app/test_entrypoint.py), talks to the test's
  fake Bot API and model server, and is killed when its `Cluster` closes, whatever happened;
- the load balancer forwards each webhook POST to the next worker in turn and answers with
  that worker's status; a worker it cannot reach (refused, reset, hung up) is skipped for
  the next, as a real balancer does with a dead backend, so an update is only refused when
  no worker takes it;
- advisory locks (chat locks, inbox claims, the polling leadership) are database-wide, not
  per schema: each test takes chat ids (`chat_ids`) and a bot token (`unique_token`) of its
  own, so test runs sharing the database never wait on each other's locks;
- `Replies` reads the fake Bot API's calls once each, in order: waiting for many chats costs
  one scan per new call, not one per waiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
from aiohttp import web

from fakes.bot_api import TOKEN, FakeBotApi
from fakes.model_server import FakeModelServer
from fakes.serving import LocalServer
from tests.app.test_entrypoint import BotProcess, fakes_env

SECRET = "cluster-webhook-secret"
PATH = "/telegram/webhook"
API_TOKEN = "cluster-api-token"
POOL_SIZE = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unique_token() -> str:
    """A bot token of this test alone (the polling leadership lock is named after its id)."""
    return f"{secrets.randbelow(10**9) + 10**9}:TEST-TOKEN"


def chat_ids(count: int) -> list[int]:
    """`count` private chat ids no other test run uses (their chat locks are their own)."""
    first = (secrets.randbelow(10**6) + 1) * 1000
    return list(range(first, first + count))


def worker_env(
    home: Path,
    bot_api: FakeBotApi,
    model_server: FakeModelServer,
    database_url: str,
    *,
    port: int | None = None,
    webhook: bool = True,
    api: bool = False,
    token: str = TOKEN,
) -> dict[str, str]:
    """A worker's settings: webhook mode on `port` (or polling), the API when asked."""
    values = {
        "TELEGRAM_BOT_TOKEN": token,
        "DATABASE_URL": database_url,
        # Few connections per worker: the database's 100 are shared by every test run on
        # this machine, and a worker past the limit answers "try again later".
        "DATABASE_POOL_SIZE": str(POOL_SIZE),
        "USER_RATE_LIMIT_PER_MINUTE": "0",
        "API_HOST": "127.0.0.1",
        # The test's balancer is every request's one address, sending as many at once as
        # the test's chats (a deployment's proxy is among TRUSTED_PROXIES instead).
        "HTTP_MAX_CONNECTIONS_PER_ADDRESS": "256",
    }
    if port is not None:
        values["API_PORT"] = str(port)
    if webhook:
        values["WEBHOOK_URL"] = "https://bot.example.com" + PATH
        values["WEBHOOK_SECRET"] = SECRET
    if api:
        values["API_ENABLED"] = "true"
        values["API_TOKEN"] = API_TOKEN
    return fakes_env(home, bot_api, model_server, **values)


@dataclass
class Worker:
    """One worker process; `port` is its HTTP port (None in polling mode without the API)."""

    name: str
    bot: BotProcess
    port: int | None

    @property
    def alive(self) -> bool:
        return self.bot.process.returncode is None

    async def kill(self) -> None:
        """kill -9, then reap it."""
        self.bot.process.kill()
        await self.bot.process.wait()

    def log(self) -> str:
        return self.bot.log.read_text(errors="replace")


@dataclass
class Cluster:
    """Worker processes started by `start`; `close` kills those still running."""

    home: Path
    workers: list[Worker] = field(default_factory=list)

    async def start(self, env: dict[str, str], port: int | None = None) -> Worker:
        name = f"worker{len(self.workers)}"
        bot = await BotProcess.launch(env, self.home / f"{name}.log", self.home)
        worker = Worker(name, bot, port)
        self.workers.append(worker)
        return worker

    async def running(self, timeout: float = 60) -> None:  # noqa: ASYNC109
        """Wait until every worker logged its start line."""
        await asyncio.gather(*(w.bot.logged("is running", timeout) for w in self.workers))

    async def first_to_log(self, fragment: str, timeout: float = 30) -> Worker:  # noqa: ASYNC109
        """The first worker whose log contains `fragment` (the logs are read every 20 ms)."""
        deadline = time.monotonic() + timeout
        while True:
            for worker in self.workers:
                if fragment in worker.log():
                    return worker
            if time.monotonic() > deadline:
                raise AssertionError(f"{fragment!r} never logged:\n{self.logs()}")
            await asyncio.sleep(0.02)

    def warnings(self, most: int = 20) -> str:
        """The workers' first WARNING and ERROR lines (what to read when a reply is missing)."""
        lines = [
            f"{w.name}: {line}"
            for w in self.workers
            for line in w.log().splitlines()
            if " WARNING " in line or " ERROR " in line
        ]
        return "\n".join(lines[:most])

    def logs(self) -> str:
        return "\n".join(f"--- {w.name}\n{w.log()}" for w in self.workers)

    async def close(self) -> None:
        for worker in self.workers:
            if worker.alive:
                await worker.kill()


@contextlib.asynccontextmanager
async def cluster(home: Path) -> AsyncIterator[Cluster]:
    started = Cluster(home)
    try:
        yield started
    finally:
        await started.close()


class LoadBalancer:
    """Forwards `POST PATH` round-robin to the workers' ports, skipping unreachable ones."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.forwarded: dict[int, int] = dict.fromkeys(ports, 0)  # port → requests answered
        self.skipped = 0  # attempts on a worker that could not be reached
        self._next = itertools.cycle(range(len(ports)))
        self._http: aiohttp.ClientSession | None = None
        app = web.Application()
        app.router.add_post(PATH, self._forward)
        self._server = LocalServer(app)

    @property
    def url(self) -> str:
        return self._server.base_url + PATH

    async def __aenter__(self) -> LoadBalancer:
        self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        await self._server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._server.stop()
        if self._http is not None:
            await self._http.close()

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._http is not None
        body = await request.read()
        headers = {
            "Content-Type": request.headers.get("Content-Type", "application/json"),
            "X-Telegram-Bot-Api-Secret-Token": request.headers.get(
                "X-Telegram-Bot-Api-Secret-Token", ""
            ),
        }
        first = next(self._next)
        for n in range(len(self.ports)):
            port = self.ports[(first + n) % len(self.ports)]
            try:
                async with self._http.post(
                    f"http://127.0.0.1:{port}{PATH}", data=body, headers=headers
                ) as response:
                    await response.read()
                    self.forwarded[port] += 1
                    return web.Response(status=response.status)
            except aiohttp.ClientConnectionError:
                self.skipped += 1
        return web.Response(status=502)


async def post_update(http: aiohttp.ClientSession, url: str, update: dict[str, Any]) -> int:
    """POST an update as Telegram does (with the secret header); the status."""
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    async with http.post(url, json=update, headers=headers) as response:
        return response.status


@dataclass(frozen=True, slots=True)
class Sent:
    """A message the bot sent to a chat, when the fake Bot API received it."""

    text: str
    monotonic: float


class Replies:
    """The bot's successful sendMessage calls per chat; `first_line` waits for one."""

    def __init__(self, bot_api: FakeBotApi) -> None:
        self._bot_api = bot_api
        self._seen = 0
        self._pending: list[int] = []
        self.by_chat: dict[Any, list[Sent]] = {}

    def _scan(self) -> None:
        calls = self._bot_api.calls
        self._pending.extend(range(self._seen, len(calls)))
        self._seen = len(calls)
        waiting = []
        for index in self._pending:
            call = calls[index]
            if call.method != "sendMessage":
                continue
            if call.status == 200 and call.result is None:  # recorded, not yet answered
                waiting.append(index)
            elif call.status == 200:
                sent = Sent(str(call.params.get("text", "")), call.monotonic)
                self.by_chat.setdefault(call.params.get("chat_id"), []).append(sent)
        self._pending = waiting

    def first_lines(self, chat_id: Any) -> list[str]:
        self._scan()
        return [s.text.split("\n", 1)[0] for s in self.by_chat.get(chat_id, [])]

    async def first_line(self, chat_id: Any, line: str, timeout: float = 60) -> Sent:  # noqa: ASYNC109
        """Wait until a message whose first line is `line` was sent to the chat."""
        deadline = time.monotonic() + timeout
        while True:
            self._scan()
            for sent in self.by_chat.get(chat_id, []):
                if sent.text.split("\n", 1)[0] == line:
                    return sent
            if time.monotonic() > deadline:
                got = [s.text.split("\n", 1)[0] for s in self.by_chat.get(chat_id, [])]
                raise AssertionError(f"chat {chat_id}: never sent {line!r}; sent {got}")
            await asyncio.sleep(0.02)


async def histories(database_url: str) -> dict[str, list[list[tuple[str, str]]]]:
    """Every chat's consultations (oldest first), each as its (role, text) rows by seq."""
    db = await asyncpg.connect(database_url)
    try:
        rows = await db.fetch(
            "SELECT c.chat_key, c.id, m.role, m.text FROM consultations c"
            " JOIN messages m ON m.consultation_id = c.id"
            " ORDER BY c.chat_key, c.created_at, c.id, m.seq"
        )
    finally:
        await db.close()
    found: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for row in rows:
        found.setdefault(row["chat_key"], {}).setdefault(row["id"], []).append(
            (row["role"], row["text"])
        )
    return {chat: list(by_id.values()) for chat, by_id in found.items()}
